// CDPruner (Zhang et al., "Beyond Attention or Similarity: Maximizing Conditional Diversity for Token Pruning
// in MLLMs", NeurIPS 2025, §3): the kept set is the MAP of a determinantal point process whose kernel is the
// pairwise cosine similarity of the visual tokens conditioned on their relevance to the instruction,
// L = diag(q)·S·diag(q), found by the fast greedy MAP inference of Chen et al. (NeurIPS 2018, Alg. 1).
// Relevance: r_i = mean over instruction tokens of cos(v_i, t_j), min–max normalised per image (as the
// release); q = r by default (the release's kernel), or with option theta=θ ∈ [0, 1) the relevance/diversity
// trade-off of Chen et al. §4, q = exp(θ·r / (2(1−θ))) (θ = 0: pure diversity).
// Deviations: no CLIP text encoder here, so the instruction is represented by its LLM input embeddings (the
// text tokens after the image, in the TokenState at ℓ = 0) and relevance is measured against the projected
// visual tokens; the release measures it in CLIP space and, for LLaVA-1.5, negates the cosine — we keep its
// sign (more similar = more relevant), which is what the method intends in a shared embedding space.
#include <ATen/ATen.h>

#include <cmath>

#include "core/errors.h"
#include "prune/scorers/scorers.h"
#include "prune/selector.h"

namespace vispco {

std::vector<int64_t> dpp_greedy_map(const at::Tensor& kernel, int64_t k) {
  const int64_t n = kernel.size(0);
  TORCH_CHECK(kernel.dim() == 2 && kernel.size(1) == n, "dpp_greedy_map: kernel must be [N, N], got ",
              kernel.sizes());
  TORCH_CHECK(k >= 1 && k <= n, "dpp_greedy_map: k must be in [1, ", n, "], got ", k);
  auto L = kernel.to(at::kDouble).cpu().contiguous();
  auto Lacc = L.accessor<double, 2>();
  std::vector<double> d2(n);
  for (int64_t i = 0; i < n; ++i) d2[i] = Lacc[i][i];
  std::vector<std::vector<double>> c(n);  // c[i]: row i of the incremental Cholesky factor (length = step)
  std::vector<bool> taken(n, false);
  std::vector<int64_t> chosen;
  constexpr double kEps = 1e-10;
  while (static_cast<int64_t>(chosen.size()) < k) {
    int64_t j = -1;
    for (int64_t i = 0; i < n; ++i)
      if (!taken[i] && (j < 0 || d2[i] > d2[j])) j = i;
    chosen.push_back(j);
    taken[j] = true;
    if (d2[j] <= kEps) continue;  // rank exhausted: no Cholesky update, take the rest by remaining gain
    const double dj = std::sqrt(d2[j]);
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      double dot = 0;
      for (size_t t = 0; t < c[j].size(); ++t) dot += c[j][t] * c[i][t];
      const double e = (Lacc[j][i] - dot) / dj;
      c[i].push_back(e);
      d2[i] -= e * e;
    }
    c[j].push_back(dj);
  }
  return chosen;
}

double cdpruner_theta(const PruneStage& st) {
  const double theta = stage_option(st, "theta", 0.0);
  if (!(theta >= 0.0 && theta < 1.0))
    throw InvalidArgument("plan stage " + st.scorer + ": theta must be in [0, 1) (got " +
                          st.options.at("theta") + ")");
  return theta;
}

at::Tensor cdpruner_quality(const at::Tensor& relevance, const PruneStage& st) {
  if (st.options.count("theta") == 0) return relevance;
  const double theta = cdpruner_theta(st);
  return at::exp(relevance * (theta / (2.0 * (1.0 - theta))));
}

namespace {

class CdPrunerScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kAny; }
  std::vector<std::string> option_names() const override { return {"theta"}; }
  std::vector<std::string> selection_option_names() const override { return {"theta"}; }
  bool provides_scores() const override { return true; }

  // Relevance to the instruction: mean cosine of each alive token with the instruction tokens, [B, N] fp32
  // (0 in a row without instruction tokens).
  at::Tensor score(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1);
    auto vn = unit_tokens(in);
    auto instr = instruction_mask(*in.state);
    auto out = at::zeros({B, N}, vn.options());
    for (int64_t b = 0; b < B; ++b)
      if (auto rel = relevance_row(in, b, vn[b], instr[b]); rel.defined()) out[b].copy_(rel);
    return out;
  }

  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    auto vn = unit_tokens(in);
    auto sim = at::bmm(vn, vn.transpose(1, 2));  // [B, N, N] cosine similarity S
    auto instr = instruction_mask(*in.state);
    Selection s;
    s.keep = at::empty({B, K}, at::kLong);
    s.scores = at::zeros({B, N}, at::kFloat);
    for (int64_t b = 0; b < B; ++b) {
      auto rel = relevance_row(in, b, vn[b], instr[b]);
      at::Tensor q =
          rel.defined() ? cdpruner_quality(relevance_from_scores(rel), *in.stage) : at::ones({N}, at::kFloat);
      auto qd = q.to(sim.device());
      auto kernel = qd.unsqueeze(1) * sim[b] * qd.unsqueeze(0);
      auto pick = dpp_greedy_map(kernel, K);
      for (int64_t i = 0; i < K; ++i) {
        s.keep[b][i] = pick[i];
        s.scores[b][pick[i]] = float(K - i);  // selection order (heat-maps)
      }
    }
    s.keep = s.keep.to(in.visual_pos.device());
    s.scores = s.scores.to(in.visual_pos.device());
    return s;
  }

 protected:
  void check_extra(const PruneStage& st, const ModelShape&) const override { cdpruner_theta(st); }

 private:
  static at::Tensor unit_tokens(const ScoreInput& in) {
    auto v = gather_rows(in.state->hidden, in.visual_pos);  // [B, N, D]
    return v / v.norm(2, -1, true).clamp_min(1e-12);
  }
  // Row b's raw relevance [N] (CPU), undefined when the row has no instruction tokens.
  static at::Tensor relevance_row(const ScoreInput& in, int64_t b, const at::Tensor& vn_b,
                                  const at::Tensor& instr_b) {
    auto tpos = at::nonzero(instr_b).squeeze(1);
    if (tpos.numel() == 0) return {};
    auto t = in.state->hidden[b].index_select(0, tpos).to(at::kFloat);
    auto tn = t / t.norm(2, -1, true).clamp_min(1e-12);
    return at::matmul(vn_b, tn.t()).mean(1).cpu();  // [N]
  }
};

}  // namespace

std::unique_ptr<Scorer> make_cdpruner_scorer() { return std::make_unique<CdPrunerScorer>(); }

}  // namespace vispco
