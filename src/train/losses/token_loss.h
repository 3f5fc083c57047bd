// The token loss of stage 2: cross-entropy of the next-token targets of a teacher-forced batch — the answer
// tokens and their EOS as in LLaVA's instruction tuning (Liu et al. 2023, "Visual Instruction Tuning", §4.2),
// or every text token after the image with text_loss — and its form under a pruning forward, where the
// targets follow the surviving tokens by their original positions (prune-then-fine-tune, train/finetune.h).
#pragma once
#include <ATen/core/Tensor.h>

#include "model/token_state.h"

namespace vispco::train {

/// Mean cross-entropy of `logits` against `target`, positions with target −100 left out.
/// @param logits [B, T, V] fp32 @param target [B, T] int64 (any device) @return scalar fp32.
at::Tensor token_loss(const at::Tensor& logits, const at::Tensor& target);

/// The targets of a prefill state keyed by each token's original RoPE position, so that they can be read back
/// at the tokens a pruning forward leaves (positions are unique among a row's valid tokens and survive
/// pruning unchanged).
class PositionTargets {
 public:
  /// @param state the prefill state before the forward @param target [B, T] int64, −100 = none.
  PositionTargets(const TokenState& state, const at::Tensor& target);
  /// [B, T'] int64 (CPU): the target of each token of `survivors` (padding: −100).
  at::Tensor at(const TokenState& survivors) const;

 private:
  at::Tensor by_position_;  // [B, max position + 2] int64, the last column a dummy for padding
};

}  // namespace vispco::train
