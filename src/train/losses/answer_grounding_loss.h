// Answer-position grounding loss (train/grounding.h AnswerGrounding): at the row that predicts a turn's
// answer, each head of the grounded decoder layers should spread its attention over the objects the answer
// is about (plus the BOS sink where set); at the row predicting each token of a text answer, the glyph head
// over the glyphs that token spells. Supervises the intermediate step (docs/bundled-model-training.md,
// session 7) as a cross-entropy of attention rows to target distributions.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "train/grounding.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// Target attention distributions of the answer rows and glyph rows. At an answer row, head h takes
/// turn_answers[b][t].heads[h]: each object reaching the decoder gets an equal share spread evenly over its
/// visual tokens, with one more share on BOS when `sink` is set (heads ≥ H are ignored). At a glyph row, head
/// `glyph_head` spreads its mass evenly over the glyphs the token spells, each glyph's share over its tokens.
/// @param rows query_rows(batch, …, true) @param turn_answers [B][turn]
/// @param n_heads H @param glyph_head in [0, H)
/// @return [B, H, R, T] fp32 (CPU), each row a distribution or zero.
/// Precondition: turn_answers has an entry for every turn.
at::Tensor answer_grounding_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                                   const std::vector<std::vector<AnswerGrounding>>& turn_answers,
                                   int64_t n_heads, int64_t glyph_head);

/// Cross-entropy of attention rows to target distributions: −Σ_k q[k] log p[k] for each (batch, head, row)
/// whose target sums to > 0, averaged over them and over the layers.
/// @param probs per layer [B, H, R, T] fp32 @param target [B, H, R, T] fp32, each row a distribution or zero
/// @return scalar fp32; 0 (without a graph) when no row has a target. @throws InvalidArgument on shape
/// mismatch.
at::Tensor attention_target_loss(const std::vector<at::Tensor>& probs, const at::Tensor& target);

}  // namespace vispco::train
