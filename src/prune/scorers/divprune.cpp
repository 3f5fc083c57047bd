// DivPrune (Alvar et al., "DivPrune: Diversity-based Visual Token Pruning for Large Multimodal Models",
// CVPR 2025, §3): choose K visual tokens solving the max–min diversity problem greedily on cosine distance
// 1 − cos(x_i, x_j) of the projected tokens: first the token whose nearest neighbour is farthest, then
// repeatedly the token whose distance to the chosen set is largest.
#include <ATen/ATen.h>

#include "prune/scorers/scorers.h"

namespace vispco {

std::vector<int64_t> max_min_diverse_subset(const at::Tensor& dist, int64_t k) {
  const int64_t n = dist.size(0);
  auto d = dist.to(at::kFloat).contiguous();
  std::vector<int64_t> chosen;
  // Seed: largest nearest-neighbour distance (the diagonal excluded).
  auto off_diag = d + at::eye(n, d.options()) * std::numeric_limits<float>::max();
  chosen.push_back(std::get<0>(off_diag.min(1)).argmax().item<int64_t>());
  auto to_set = d[chosen[0]].clone();  // [N] distance of each token to the chosen set
  while (static_cast<int64_t>(chosen.size()) < k) {
    auto masked = to_set.clone();
    for (auto c : chosen) masked[c] = -1.0f;  // never pick a token twice (duplicates have distance 0)
    const int64_t next = masked.argmax().item<int64_t>();
    chosen.push_back(next);
    to_set = at::minimum(to_set, d[next]);
  }
  return chosen;
}

namespace {

class DivPruneScorer : public Scorer {
 public:
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
