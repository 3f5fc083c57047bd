// Glyph value loss: at every visual token that shows a glyph, the value that the glyph head of the first
// grounded decoder layer reads there (its key/value group's D_h columns of v_proj applied to the layer's
// normed input) classifies the glyph through a training-only linear head (cross-entropy). Grounding makes the
// head look at the right glyph; this makes what it reads there the glyph's identity
// (docs/bundled-model-training.md, session 20). Supervising an intermediate representation with a linear
// classifier is deep supervision (Lee et al. 2015, "Deeply-Supervised Nets", §2).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <vector>

#include "model/llama.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// The visual tokens that show a glyph and their classes.
struct GlyphValueTargets {
  std::vector<int64_t> flat;     ///< each token's index into the [B·T] rows of the layer's input
  std::vector<int64_t> classes;  ///< its glyph class − 1, in [0, 25)
  bool empty() const { return classes.empty(); }
};

/// Each visual token of `batch` that shows a glyph, once: pooled patches share a token, which takes the glyph
/// of its first such patch (row-major).
/// @param patch_glyphs [B, N_grid] int64, each grid patch's glyph class (0 = none, 1…25).
GlyphValueTargets glyph_value_targets(const TeacherForcedBatch& batch, const at::Tensor& patch_glyphs);

/// Mean cross-entropy of head(v) against the targets' classes, v the value of key/value group `group` of
/// `layer` at each target token of `layer_input`.
/// @param layer_input [B, T, D] the hidden state entering `layer` @param group in [0, H_kv)
/// @param d_head D_h @param head D_h → 25 (fp32)
/// @return scalar fp32. @throws InvalidArgument when `targets` is empty (the loss is then 0, the caller's).
at::Tensor glyph_value_loss(LlamaDecoderLayerImpl& layer, const at::Tensor& layer_input,
                            const GlyphValueTargets& targets, int64_t group, int64_t d_head,
                            torch::nn::Linear head);

}  // namespace vispco::train
