// DivPrune (Alvar et al., "DivPrune: Diversity-based Visual Token Pruning for Large Multimodal Models",
// CVPR 2025, §3): choose K visual tokens solving the max–min diversity problem greedily on cosine distance
// 1 − cos(x_i, x_j) of the projected tokens: first the token whose nearest neighbour is farthest, then
// repeatedly the token whose distance to the chosen set is largest.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "prune/question_independent.h"
#include "prune/scorers/scorers.h"

namespace vispco {

std::vector<int64_t> max_min_diverse_subset(const at::Tensor& dist, int64_t k) {
  const int64_t n = dist.size(0);
  const auto d = dist.to(at::kFloat).contiguous();
  const float* row = d.data_ptr<float>();  // row i at row + i·n
  std::vector<int64_t> chosen;
  // Seed: largest nearest-neighbour distance (the diagonal excluded); the first of equal ones, as argmax.
  int64_t seed = 0;
  float seed_nn = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    float nn = std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j)
      if (j != i) nn = std::min(nn, row[i * n + j]);
    if (nn > seed_nn) seed_nn = nn, seed = i;
  }
  chosen.push_back(seed);
  // Distance of each token to the chosen set; a chosen token is marked −1 (distances are ≥ 0 up to
  // rounding), so it is never picked twice even when duplicates have distance 0. Plain loops: K·N work
  // without K² tensor calls (those cost ~1 s at N = 1024, K = 256).
  std::vector<float> to_set(row + seed * n, row + (seed + 1) * n);
  to_set[seed] = -1.0f;
  while (static_cast<int64_t>(chosen.size()) < k) {
    int64_t next = 0;
    for (int64_t j = 1; j < n; ++j)
      if (to_set[j] > to_set[next]) next = j;
    chosen.push_back(next);
    const float* r = row + next * n;
    for (int64_t j = 0; j < n; ++j) to_set[j] = std::min(to_set[j], r[j]);
    to_set[next] = -1.0f;
  }
  return chosen;
}

namespace {

class DivPruneScorer : public Scorer, public QuestionIndependent {
 public:
  bool question_independent() const override { return true; }
  HookPoint hook_point() const override { return HookPoint::kAny; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    const auto& h = in.state->hidden;
    auto tokens = h.gather(1, in.visual_pos.unsqueeze(-1).expand({B, N, h.size(2)})).to(at::kFloat);
    auto unit = tokens / tokens.norm(2, -1, true).clamp_min(1e-12);
    auto dist = 1.0 - at::bmm(unit, unit.transpose(1, 2));  // [B, N, N]
    Selection s;
    s.keep = at::empty({B, K}, at::kLong);
    s.scores = at::zeros({B, N}, at::kFloat);
    for (int64_t b = 0; b < B; ++b) {
      auto pick = max_min_diverse_subset(dist[b].cpu(), K);
      for (int64_t i = 0; i < K; ++i) {
        s.keep[b][i] = pick[i];
        s.scores[b][pick[i]] = float(K - i);  // earlier picks rank higher (heat-maps)
      }
    }
    s.keep = s.keep.to(in.visual_pos.device());
    s.scores = s.scores.to(in.visual_pos.device());
    return s;
  }
};

}  // namespace

std::unique_ptr<Scorer> make_divprune_scorer() { return std::make_unique<DivPruneScorer>(); }

}  // namespace vispco
