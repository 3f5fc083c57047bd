// The selector registry and its three rules: top-K, maximal marginal relevance (Carbonell & Goldstein, SIGIR
// 1998) and CDPruner's conditional DPP (Zhang et al., NeurIPS 2025, §3) with any scorer's scores as
// relevance.
#include <ATen/ATen.h>

#include <functional>
#include <tuple>

#include "core/errors.h"
#include "core/named_table.h"
#include "prune/scorers/scorers.h"
#include "prune/selector.h"
#include "prune/soft_threshold.h"

namespace vispco {

at::Tensor relevance_from_scores(const at::Tensor& scores) {
  auto s = scores.to(at::kFloat).cpu();
  return (s - s.min() + 1e-6) / (s.max() - s.min()).clamp_min(1e-12);
}

std::vector<int64_t> mmr_select(const at::Tensor& relevance, const at::Tensor& similarity, int64_t k,
                                double lambda) {
  const int64_t n = relevance.size(0);
  TORCH_CHECK(similarity.dim() == 2 && similarity.size(0) == n && similarity.size(1) == n,
              "mmr_select: similarity must be [N, N] for N = ", n, ", got ", similarity.sizes());
  TORCH_CHECK(k >= 1 && k <= n, "mmr_select: k must be in [1, ", n, "], got ", k);
  auto r = relevance.to(at::kDouble).cpu().contiguous();
  auto sim = similarity.to(at::kDouble).cpu().contiguous();
  auto ra = r.accessor<double, 1>();
  auto sa = sim.accessor<double, 2>();
  std::vector<double> redundancy(n, -std::numeric_limits<double>::infinity());  // max sim to the chosen set
  std::vector<bool> taken(n, false);
  std::vector<int64_t> chosen;
  while (static_cast<int64_t>(chosen.size()) < k) {
    int64_t best = -1;
    double best_gain = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      const double gain = chosen.empty() ? ra[i] : lambda * ra[i] - (1.0 - lambda) * redundancy[i];
      if (best < 0 || gain > best_gain) best = i, best_gain = gain;
    }
    chosen.push_back(best);
    taken[best] = true;
    for (int64_t i = 0; i < n; ++i) redundancy[i] = std::max(redundancy[i], sa[i][best]);
  }
  return chosen;
}

namespace {

// Cosine similarity of the alive tokens' hidden states: [B, N, N] fp32.
at::Tensor alive_similarity(const ScoreInput& in) {
  auto v = gather_rows(in.state->hidden, in.visual_pos);  // [B, N, D] fp32
  auto vn = v / v.norm(2, -1, true).clamp_min(1e-12);
  return at::bmm(vn, vn.transpose(1, 2));
}

class TopKSelector : public Selector {
 public:
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override {
    Selection s;
    s.scores = scores;
    s.keep = top_k_indices(scores, in.stage->keep);
    return s;
  }
};

// A selector that picks each row's K tokens by a rule on the row's scores [N] and the alive tokens' cosine
// similarity [N, N], with one stage option of its own.
class SimilarityRuleSelector : public Selector {
 public:
  using Rule = std::function<std::vector<int64_t>(const at::Tensor& scores, const at::Tensor& similarity,
                                                  const PruneStage& stage)>;
  SimilarityRuleSelector(std::string option, std::function<void(const PruneStage&)> check, Rule rule)
      : option_(std::move(option)), check_(std::move(check)), rule_(std::move(rule)) {}
  std::vector<std::string> option_names() const override { return {option_}; }
  void check(const PruneStage& st) const override { check_(st); }
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), K = in.stage->keep;
    auto sim = alive_similarity(in);
    auto keep = at::empty({B, K}, at::kLong);
    for (int64_t b = 0; b < B; ++b) keep[b].copy_(at::tensor(rule_(scores[b], sim[b], *in.stage), at::kLong));
    Selection s;
    s.scores = scores;
    s.keep = keep.to(in.visual_pos.device());
    return s;
  }

 private:
  std::string option_;
  std::function<void(const PruneStage&)> check_;
  Rule rule_;
};

double mmr_lambda(const PruneStage& st) {
  const double l = stage_option(st, "lambda", 0.5);
  if (!(l >= 0.0 && l <= 1.0))
    throw InvalidArgument("plan stage " + st.scorer + ": select=mmr's lambda must be in [0, 1] (got " +
                          st.options.at("lambda") + ")");
  return l;
}

std::unique_ptr<Selector> make_mmr() {
  return std::make_unique<SimilarityRuleSelector>(
      "lambda", [](const PruneStage& st) { mmr_lambda(st); },
      [](const at::Tensor& scores, const at::Tensor& sim, const PruneStage& st) {
        return mmr_select(relevance_from_scores(scores), sim, st.keep, mmr_lambda(st));
      });
}

std::unique_ptr<Selector> make_dpp() {
  return std::make_unique<SimilarityRuleSelector>(
      "theta", [](const PruneStage& st) { cdpruner_theta(st); },
      [](const at::Tensor& scores, const at::Tensor& sim, const PruneStage& st) {
        auto q = cdpruner_quality(relevance_from_scores(scores), st).to(sim.device());
        return dpp_greedy_map(q.unsqueeze(1) * sim * q.unsqueeze(0), st.keep);
      });
}

// Dominant + contextual tokens (VisionZip's split, Yang et al. CVPR 2025 §3, for any scorer at any layer):
// the K − M highest-scoring tokens stay, the others merge into M contextual tokens with VisionZip's rule,
// similarity by the tokens' own hidden states (inside the LLM there are no tower keys). M = option
// contextual, default round(K·10/64) as VisionZip's settings (10 of 64).
class MergeSelector : public Selector {
 public:
  std::vector<std::string> option_names() const override { return {"contextual"}; }
  void check(const PruneStage& st) const override { n_contextual(st); }
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    const int64_t m = n_contextual(*in.stage);
    Selection s;
    s.scores = scores;
    s.keep = top_k_indices(scores, K - m);
    if (m == 0) return s;
    const auto& h = in.state->hidden;
    auto tokens = h.gather(1, in.visual_pos.unsqueeze(-1).expand({B, N, h.size(2)}));  // [B, N, D]
    auto grid = in.state->grid_index.gather(1, in.visual_pos);                         // [B, N]
    std::tie(s.merged, s.merged_grid_index) = merge_unkept(tokens, tokens, s.keep, grid, m);
    return s;
  }

 private:
  static int64_t n_contextual(const PruneStage& st) {
    return stage_int_option(st, "contextual", std::llround(st.keep * 10.0 / 64.0), 0,
                            std::max<int64_t>(0, st.keep - 1));
  }
};

}  // namespace

const std::vector<SelectorEntry>& selector_registry() {
  static const std::vector<SelectorEntry> table = {
      {"topk", "the K highest scores", [] { return std::make_unique<TopKSelector>(); }},
      {"mmr",
       "maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998): λ·relevance − (1−λ)·max cosine to "
       "the "
       "kept set, option lambda (0.5)",
       make_mmr},
      {"dpp",
       "CDPruner's conditional DPP (Zhang et al., NeurIPS 2025 §3) with the scores as relevance: greedy MAP "
       "of "
       "diag(q)·S·diag(q), option theta",
       make_dpp},
      {"merge",
       "dominant + contextual (VisionZip, Yang et al. CVPR 2025 §3): the top K − M stay, the rest merge "
       "into M tokens by hidden-state similarity, option contextual=M (round(K·10/64))",
       [] { return std::make_unique<MergeSelector>(); }},
      {"threshold",
       "VisPCO's soft threshold (Ji et al., ACL 2026 §3.2): the top K at inference; its relaxed form "
       "(straight-through masks) trains VisPCO",
       [] { return std::make_unique<SoftThresholdSelector>(); }},
  };
  return table;
}

std::unique_ptr<Selector> make_selector(const std::string& name) {
  return find_named(selector_registry(), name, "selector").make();
}

}  // namespace vispco
