// Answer-row readout loss: a training-only linear head (D → 3) reads the hidden state after a decoder layer
// at each turn's answer row and regresses AnswerGrounding::readout — the two objects' offset for spatial
// questions, the count for counting ones — by mean squared error: the intermediate step those families need,
// supervised where the answer is computed (deep supervision, Lee et al. 2015, "Deeply-Supervised Nets", §2).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "train/grounding.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// The readout targets of each answer row: turn_answers[b][t].readout at slot rows.first_answer[b] + t.
/// @return [B, R, 3] fp32 (CPU), NaN where a row has no target. Precondition: turn_answers has an entry for
/// every turn.
at::Tensor readout_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                          const std::vector<std::vector<AnswerGrounding>>& turn_answers);

/// Mean squared error of head(hidden) against the targets that are not NaN.
/// @param head D → 3 @param hidden [B, R, D] the recorded rows' hidden states
/// @param target [B, R, 3] fp32 on hidden's device, NaN = none
/// @return scalar fp32; 0 (on target's device, without a graph) when no entry has a target.
at::Tensor readout_loss(torch::nn::Linear head, const at::Tensor& hidden, const at::Tensor& target);

}  // namespace vispco::train
