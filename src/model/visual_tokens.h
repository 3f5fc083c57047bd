// The visual tokens a family's encoder hands the decoder, one batch of images at a time, with each image's
// layout (N_v and grid), which may differ between images (model/family.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/shape.h"

namespace vispco {

/// Visual tokens of a batch of images, ready for the decoder. Images may differ in how many tokens they make
/// (dynamic resolution, tiling, unpadding): rows are then zero-padded at the end to the longest, N_max.
struct VisualTokens {
  at::Tensor embeds;  ///< [B, N_max, D] projected visual tokens, compute dtype
  /// [B, N_max] fp32 head-averaged [CLS] attention at the feature layer (when asked); for a tower without
  /// [CLS] (Qwen2-VL), the attention each token receives in its last block (model/qwen2_vl/vision_received.h)
  at::Tensor cls_attention;
  at::Tensor keys;  ///< [B, N_max, D_v] feature-layer keys (when asked)
  /// One layout per image (its N_v and grid); empty when every image has the shape's default layout
  /// (ModelShape::default_layout(), N_max = N_v).
  std::vector<VisualLayout> layouts;

  /// Image b's layout: layouts[b], or `shape`'s default when layouts is empty.
  VisualLayout layout(int64_t b, const ModelShape& shape) const;
  /// Image b alone, cut to its own N_v: embeds [1, N_b, D] (and cls_attention, keys when defined), layouts
  /// {its layout}.
  VisualTokens row(int64_t b, const ModelShape& shape) const;
  /// True when the images' layouts differ (a batch that must be prefilled in groups of one layout).
  bool ragged() const;
};

/// Joins single images' visual tokens (row() results, or encode_images() of one image) into one batch,
/// padding rows to the longest. @throws InvalidArgument for an empty list or rows of different widths.
VisualTokens stack_visual_tokens(const std::vector<VisualTokens>& rows, const ModelShape& shape);

}  // namespace vispco
