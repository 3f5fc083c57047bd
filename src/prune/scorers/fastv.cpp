// FastV (Chen et al., "An Image is Worth 1/2 Tokens After Layer 2", ECCV 2024, §4): after layer ℓ−1, rank
// visual tokens by the attention the last prompt token pays them, averaged over heads; keep the top K.
// Deviation: the paper's implementation recomputes the full attention map at layer ℓ−1; we read only the
// last token's row, which holds the same numbers.
#include <ATen/ATen.h>

#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

class FastVScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kInLlm; }
  ScorerNeeds needs() const override { return {.attention = true, .prompt_only = true}; }
  bool provides_scores() const override { return true; }
  at::Tensor score(const ScoreInput& in) const override { return fastv_scores(in.attn_rows, in.visual_pos); }
};

}  // namespace

at::Tensor fastv_scores(const at::Tensor& attn_rows, const at::Tensor& visual_pos) {
  return attn_rows.mean(/*dim=*/1).select(1, 0).gather(1, visual_pos);  // head-mean attention of row 0
}

std::unique_ptr<Scorer> make_fastv_scorer() { return std::make_unique<FastVScorer>(); }

}  // namespace vispco
