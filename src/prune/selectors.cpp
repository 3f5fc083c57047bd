// The selector registry and its three rules: top-K, maximal marginal relevance (Carbonell & Goldstein, SIGIR
// 1998) and CDPruner's conditional DPP (Zhang et al., NeurIPS 2025, §3) with any scorer's scores as
// relevance.
#include <ATen/ATen.h>

#include "core/errors.h"
#include "core/named_table.h"
#include "prune/scorers/scorers.h"
#include "prune/selector.h"

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

// Runs `pick(b)` → K indices for each row into a Selection that carries the given scores.
template <class Pick>
Selection per_row(const at::Tensor& scores, const ScoreInput& in, Pick pick) {
  const int64_t B = in.visual_pos.size(0), K = in.stage->keep;
  auto keep = at::empty({B, K}, at::kLong);
  for (int64_t b = 0; b < B; ++b) keep[b].copy_(at::tensor(pick(b), at::kLong));
  Selection s;
  s.scores = scores;
  s.keep = keep.to(in.visual_pos.device());
  return s;
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

class MmrSelector : public Selector {
 public:
  std::vector<std::string> option_names() const override { return {"lambda"}; }
  void check(const PruneStage& st) const override { lambda(st); }
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override {
    auto sim = alive_similarity(in).cpu();
    const double l = lambda(*in.stage);
    return per_row(scores, in, [&](int64_t b) {
      return mmr_select(relevance_from_scores(scores[b]), sim[b], in.stage->keep, l);
    });
  }

 private:
  static double lambda(const PruneStage& st) {
    const double l = stage_option(st, "lambda", 0.5);
    if (!(l >= 0.0 && l <= 1.0))
      throw InvalidArgument("plan stage " + st.scorer + ": select=mmr's lambda must be in [0, 1] (got " +
                            st.options.at("lambda") + ")");
    return l;
  }
};

class DppSelector : public Selector {
 public:
  std::vector<std::string> option_names() const override { return {"theta"}; }
  void check(const PruneStage& st) const override { cdpruner_theta(st); }
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override {
    auto sim = alive_similarity(in);
    return per_row(scores, in, [&](int64_t b) {
      auto q = cdpruner_quality(relevance_from_scores(scores[b]), *in.stage).to(sim.device());
      return dpp_greedy_map(q.unsqueeze(1) * sim[b] * q.unsqueeze(0), in.stage->keep);
    });
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
       [] { return std::make_unique<MmrSelector>(); }},
      {"dpp",
       "CDPruner's conditional DPP (Zhang et al., NeurIPS 2025 §3) with the scores as relevance: greedy MAP "
       "of "
       "diag(q)·S·diag(q), option theta",
       [] { return std::make_unique<DppSelector>(); }},
  };
  return table;
}

std::unique_ptr<Selector> make_selector(const std::string& name) {
  return find_named(selector_registry(), name, "selector").make();
}

}  // namespace vispco
