// Word-level grounding loss (train/grounding.h): at the token where an object word of a question ends, head 0
// of the grounded decoder layers should put its attention mass on the visual tokens of the objects the
// question is about — region–phrase grounding as in Kosmos-2 (Peng et al. 2023) and Shikra (Chen et al.
// 2023), here as an attention target instead of box tokens.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// The keys each object-word row should attend to.
/// @param rows query_rows(batch, true, …): the word rows come first
/// @param turn_patches [B][turn] grid patches showing what the turn is about (object_patches()); a patch
/// whose visual token is not fed to the decoder is left out
/// @return [B, R, T] bool (CPU). Precondition: turn_patches has an entry for every turn.
at::Tensor word_grounding_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                                 const std::vector<std::vector<std::vector<int64_t>>>& turn_patches);

/// Grounding loss: for each recorded layer, head 0, and each query row with a target, −log of the attention
/// mass on its target keys; averaged over those rows and layers.
/// @param probs per layer [B, H, R, T] fp32 @param target [B, R, T] bool, the keys each row should attend to
/// @return scalar fp32; 0 (without a graph) when no row has a target. @throws InvalidArgument on shape
/// mismatch.
at::Tensor grounding_loss(const std::vector<at::Tensor>& probs, const at::Tensor& target);

}  // namespace vispco::train
