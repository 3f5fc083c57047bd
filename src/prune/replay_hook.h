// Replaying a pruning plan's decisions in another forward (prune-then-fine-tune, issue 19): the tokens an
// inference prefill with the plan kept at each stage (PlanHook traces) are kept again, at the same layers, in
// a training forward over the same images and prompts followed by their answers — so the fine-tuned model
// sees exactly the tokens it will see at inference, at their original positions, while gradients flow through
// them.
#pragma once
#include <cstdint>
#include <vector>

#include "model/token_state.h"
#include "prune/plan_hook.h"

namespace vispco {

/// A PrefillHook that removes, before each recorded stage's layer, the visual tokens whose patch that stage
/// did not keep. Text tokens (the answers included) and padding always survive, in order.
class ReplayHook : public PrefillHook {
 public:
  /// @param traces PlanHook::traces() of the inference prefill, in stage order, each kept mask [B, N_v].
  /// @throws InvalidArgument when a stage merged tokens (VisionZip contextual tokens, pooling, SparseVLM
  /// recycling: a mask cannot reproduce them) or when the rows of a stage keep different numbers of tokens.
  explicit ReplayHook(const std::vector<StageTrace>& traces);
  bool acts_before(int64_t layer) const override;
  bool apply(int64_t layer, TokenState& state, const LayerSignals& signals) override;

 private:
  std::vector<int64_t> layers_;
  std::vector<at::Tensor> kept_;  // [B, N_v] bool per stage
};

}  // namespace vispco
