// Glyph readout loss: at the row that predicts each token of a text answer — where the glyph head of the
// grounded layer attends to the glyphs the token spells — the hidden state after the readout layer, through
// the decoder's final norm and LM head, predicts that token (cross-entropy). The counterpart of the
// answer-row readout for text: a logit-lens / deep-supervision loss (docs/bundled-model-training.md, session
// 20). Its gradient also reaches the final norm and the LM head, which the model's own output uses.
#pragma once
#include <ATen/core/Tensor.h>

#include "model/llama.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// The token each glyph row emits, at slot rows.first_glyph[b] + j of glyph row j.
/// @return [B, R] int64 (CPU), −100 where a slot is no glyph row.
at::Tensor glyph_readout_target(const TeacherForcedBatch& batch, const QueryRows& rows);

/// Mean cross-entropy of lm's LM head on lm's final norm of `hidden` against `target`, over the rows with
/// one.
/// @param hidden [B, R, D] the recorded rows' hidden states after the readout layer
/// @param target [B, R] int64 on hidden's device, −100 = none
/// @return scalar fp32; 0 (on target's device, without a graph) when no row has a target.
at::Tensor glyph_readout_loss(LlamaForCausalLMImpl& lm, const at::Tensor& hidden, const at::Tensor& target);

}  // namespace vispco::train
