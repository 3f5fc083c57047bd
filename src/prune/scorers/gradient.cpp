// Gradient-based scorer (seed-described, DESIGN.md §5): a visual token's importance is
// ‖∂ log p(y) / ∂ v_i‖₂ over the hidden dimension, y being the model's greedy first answer token, computed
// by one forward + backward pass of the unpruned decoder before the pruned prefill (model/saliency.h,
// requested by generate() through PrefillHook::wants_visual_saliency()). The gradient is taken at the LLM's
// input (the projected tokens), so at a stage ℓ ≥ 1 an alive token is ranked by the saliency of its patch
// (merged tokens by their representative patch). Extra cost: the pre-pass, ≈ 3 unpruned prefills in FLOPs
// (GenerationStats::prepass_ms measures it).
#include <ATen/ATen.h>

#include "core/errors.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

class GradientScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kAny; }
  ScorerNeeds needs() const override { return {.saliency = true}; }
  bool provides_scores() const override { return true; }
  at::Tensor score(const ScoreInput& in) const override {
    if (!in.saliency.defined()) throw InvalidArgument("grad needs the gradient pre-pass (none was run)");
    auto grid = in.state->grid_index.gather(1, in.visual_pos);  // [B, N] patch of each alive token
    return in.saliency.to(grid.device()).gather(1, grid);
  }
};

}  // namespace

std::unique_ptr<Scorer> make_gradient_scorer() { return std::make_unique<GradientScorer>(); }

}  // namespace vispco
