// SparseVLM (Zhang et al., "SparseVLM: Visual Token Sparsification for Efficient Vision-Language Model
// Inference", ICML 2025, §3): text-guided pruning. "Raters" are the instruction tokens relevant to the image,
// chosen once from the LLM's input embeddings (§3.2: softmax over text of visual·textᵀ, averaged over the
// visual tokens, kept above the mean); at a stage after layer ℓ−1 each visual token is scored by the raters'
// attention to it, averaged over heads and raters (only the raters' attention rows are materialised); the
// top tokens are kept and part of the pruned ones is recycled (§3.4): the 30% best-scored pruned tokens are
// clustered (density peaks, DPC-kNN) into a few merged tokens. Progressive pruning (§3.3: the release prunes
// after layers 2, 6 and 15 of 32) is a plan of several sparsevlm stages, e.g.
//   sparsevlm:layer=2,keep=192+sparsevlm:layer=6,keep=128+sparsevlm:layer=15,keep=64
// Recycled tokens count towards K: option recycle=M (default, as the release's rule on the pruned count
// n_p = N − K: M = ⌊(⌊0.3·n_p⌋ + 1) / 10⌋ + 1, at most K − 1), recycle=0 turns it off.
// Deviations: the release keeps K tokens and adds the recycled ones on top (its "64 tokens" hold ~80); the
// release derives its per-layer token counts from a rank-based schedule, here each stage's K is explicit.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "prune/scorers/scorers.h"

namespace vispco {

std::vector<int64_t> sparsevlm_raters(const at::Tensor& visual, const at::Tensor& text) {
  const int64_t M = text.size(0);
  std::vector<int64_t> out;
  if (M == 0) return out;
  auto rel = at::softmax(at::matmul(visual.to(at::kFloat), text.to(at::kFloat).t()), 1).mean(0).cpu();  // [M]
  const float mean = rel.mean().item<float>();
  auto acc = rel.accessor<float, 1>();
  for (int64_t j = 0; j < M; ++j)
    if (acc[j] > mean) out.push_back(j);
  if (out.empty())
    for (int64_t j = 0; j < M; ++j) out.push_back(j);
  return out;
}

std::pair<at::Tensor, std::vector<int64_t>> dpc_knn_merge(const at::Tensor& x, int64_t m) {
  const int64_t n = x.size(0);
  TORCH_CHECK(m >= 1 && m <= n, "dpc_knn_merge: m must be in [1, ", n, "], got ", m);
  auto xf = x.to(at::kFloat).cpu();
  auto dist =
      at::cdist(xf.unsqueeze(0), xf.unsqueeze(0)).squeeze(0) / std::sqrt(double(x.size(1)));  // [n, n]
  const int64_t nn = std::min<int64_t>(5, n - 1);
  at::Tensor density;
  if (nn > 0) {
    auto knn =
        std::get<0>(dist.topk(nn + 1, 1, /*largest=*/false)).narrow(1, 1, nn);  // drop the self-distance
    density = at::exp(-(knn * knn).mean(1));
  } else {
    density = at::ones({n}, at::kFloat);
  }
  auto dacc = density.accessor<float, 1>();
  auto dd = dist.accessor<float, 2>();
  const float dmax = dist.max().item<float>();
  std::vector<double> score(n);
  for (int64_t i = 0; i < n; ++i) {
    double delta = dmax;
    bool any_higher = false;
    for (int64_t j = 0; j < n; ++j) {
      const bool higher =
          dacc[j] > dacc[i] || (dacc[j] == dacc[i] && j < i);  // ties: lower index ranks higher
      if (higher) {
        delta = any_higher ? std::min<double>(delta, dd[i][j]) : dd[i][j];
        any_higher = true;
      }
    }
    score[i] = delta * dacc[i];
  }
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  std::vector<int64_t> centres(order.begin(), order.begin() + m);
  auto cidx = at::tensor(centres, at::kLong);
  auto assign = dist.index_select(1, cidx).argmin(1);   // [n] nearest centre
  assign.index_put_({cidx}, at::arange(m, at::kLong));  // a centre belongs to itself
  auto sums = at::zeros({m, x.size(1)}, at::kFloat);
  sums.index_add_(0, assign, xf);
  auto counts = at::bincount(assign, {}, m).to(at::kFloat).unsqueeze(1);
  return {(sums / counts).to(x.device(), x.scalar_type()), centres};
}

namespace {

constexpr double kRecycleFraction = 0.3;  // share of the pruned tokens considered for recycling (§3.4)

class SparseVlmScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kInLlm; }
  ScorerNeeds needs() const override { return {.attention = true}; }
  std::vector<std::string> option_names() const override { return {"recycle"}; }
  std::vector<std::string> selection_option_names() const override { return {"recycle"}; }
  bool provides_scores() const override { return true; }
  // The relevant raters' head-mean attention to each alive token, averaged over the raters: [B, N].
  at::Tensor score(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0);
    auto per_row = in.attn_rows.mean(1);  // [B, R, T] head mean
    auto w = in.attn_weights.defined()
                 ? in.attn_weights.to(per_row.device())
                 : at::full({B, per_row.size(1)}, 1.0 / per_row.size(1), per_row.options());
    auto rated = (per_row * w.unsqueeze(-1)).sum(1);  // [B, T] rater average
    return rated.gather(1, in.visual_pos);
  }

  static int64_t n_recycled(const PruneStage& st, int64_t n_alive) {
    if (st.options.count("recycle"))
      return stage_int_option(st, "recycle", 0, 0, std::max<int64_t>(0, st.keep - 1));
    const int64_t pruned = std::max<int64_t>(0, n_alive - st.keep);
    const int64_t m = (static_cast<int64_t>(std::floor(kRecycleFraction * pruned)) + 1) / 10 + 1;
    return std::min<int64_t>(m, st.keep - 1);
  }

  AttentionQueries attention_queries(const ScoreInput& in) const override {
    const auto& s = *in.state;
    const int64_t B = s.hidden.size(0);
    if (in.input_state == nullptr)
      throw InvalidArgument("sparsevlm: the LLM's input tokens were not recorded");
    const auto& s0 = *in.input_state;
    // Instruction tokens are never pruned and keep their order, so the j-th one at the input is the j-th now.
    auto instr0 = instruction_mask(s0), instr = instruction_mask(s);
    std::vector<std::vector<int64_t>> rows(B);
    size_t r_max = 1;
    for (int64_t b = 0; b < B; ++b) {
      auto vis0 = at::nonzero(s0.visual[b]).squeeze(1);
      auto txt0 = at::nonzero(instr0[b]).squeeze(1);
      auto now = at::nonzero(instr[b]).squeeze(1).cpu();
      TORCH_CHECK(now.numel() == txt0.numel(),
                  "sparsevlm: instruction tokens changed between layer 0 and now");
      for (auto j : sparsevlm_raters(s0.hidden[b].index_select(0, vis0), s0.hidden[b].index_select(0, txt0)))
        rows[b].push_back(now[j].item<int64_t>());
      if (rows[b].empty()) rows[b].push_back(s.hidden.size(1) - 1);  // no instruction: the last token rates
      r_max = std::max(r_max, rows[b].size());
    }
    // Rows differ in rater count: pad with the first rater at weight 0.
    auto idx = at::empty({B, static_cast<int64_t>(r_max)}, at::kLong);
    auto w = at::zeros({B, static_cast<int64_t>(r_max)}, at::kFloat);
    for (int64_t b = 0; b < B; ++b)
      for (size_t r = 0; r < r_max; ++r) {
        idx[b][r] = rows[b][r < rows[b].size() ? r : 0];
        if (r < rows[b].size()) w[b][r] = 1.0f / static_cast<float>(rows[b].size());
      }
    const auto dev = s.positions.device();
    return {idx.to(dev), w.to(dev)};
  }

  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    Selection s;
    s.scores = score(in);  // [B, N]
    const int64_t m = n_recycled(*in.stage, N);
    s.keep = top_k_indices(s.scores, K - m);
    if (m == 0) return s;
    // Recycling: the best-scored 30% of the pruned tokens are clustered into m merged tokens.
    const int64_t n_pruned = N - (K - m);
    const int64_t pool = std::max<int64_t>(m, static_cast<int64_t>(std::ceil(kRecycleFraction * n_pruned)));
    auto order = std::get<1>(s.scores.sort(1, /*descending=*/true));  // [B, N]
    auto pool_idx = order.narrow(1, K - m, pool);                     // next best after the kept ones
    auto tokens = in.state->hidden.gather(
        1, in.visual_pos.gather(1, pool_idx).unsqueeze(-1).expand({B, pool, in.state->hidden.size(2)}));
    auto grid = in.state->grid_index.gather(1, in.visual_pos.gather(1, pool_idx));  // [B, pool]
    std::vector<at::Tensor> merged, reps;
    for (int64_t b = 0; b < B; ++b) {
      auto [mt, centres] = dpc_knn_merge(tokens[b], m);
      merged.push_back(mt);
      reps.push_back(grid[b].index_select(0, at::tensor(centres, at::kLong).to(grid.device())));
    }
    s.merged = at::stack(merged);
    s.merged_grid_index = at::stack(reps);
    return s;
  }

 protected:
  void check_extra(const PruneStage& st, const ModelShape&) const override {
    if (st.options.count("recycle")) stage_int_option(st, "recycle", 0, 0, std::max<int64_t>(0, st.keep - 1));
  }
};

}  // namespace

std::unique_ptr<Scorer> make_sparsevlm_scorer() { return std::make_unique<SparseVlmScorer>(); }

}  // namespace vispco
