// The small value code outside model/ reads about a loaded model: how many visual tokens an image becomes,
// their grid, the decoder's widths and depth, the prompt's special ids and the FLOPs spec. A model family
// (model/family.h) fills it from its own config; pruning, evaluation, searches and serving never see the
// family's config type (issue 44).
#pragma once
#include <cstdint>
#include <string>

#include "cost/flops.h"

namespace vispco {

/// How one image's visual tokens are laid out, as its family's encoder made them (model/family.h). Images of
/// one model may differ (dynamic resolution, AnyRes tiling, unpadding); a prefill group holds one layout.
struct VisualLayout {
  int64_t n_tokens = 0;   ///< N_v, visual tokens of this image
  int64_t grid_rows = 0;  ///< rows of the patch grid that grid indices refer to (row-major, g = r·cols + c)
  int64_t grid_cols = 0;  ///< columns of that grid
  bool operator==(const VisualLayout&) const = default;
};

/// Shape of a vision-language model as the pruning and serving layers need it.
struct ModelShape {
  /// Hugging Face architecture name of the family, e.g. "LlavaForConditionalGeneration".
  std::string architecture;
  /// N_v, visual tokens one image puts into the decoder at the family's default image size; families with
  /// dynamic resolution or tiling give each image its own count (VisualTokens::layouts).
  int64_t n_visual_tokens = 0;
  /// Visual-token grid, rows × columns of patches (N_v = rows·cols, plus one when has_cls_token).
  int64_t grid_rows = 0;
  int64_t grid_cols = 0;
  /// The visual tokens include the tower's [CLS] token after the grid (LLaVA's "full" select strategy).
  bool has_cls_token = false;
  /// Position-id axes: 1 for RoPE over [B, T] positions; 3 for multi-axis (M-RoPE: time, row, column).
  int64_t position_axes = 1;

  int64_t n_layers = 0;        ///< L, decoder layers
  int64_t hidden_size = 0;     ///< D, decoder width (visual tokens enter it projected to D)
  int64_t vocab_size = 0;      ///< V
  int64_t max_positions = 0;   ///< longest sequence the decoder takes, tokens
  int64_t image_token_id = 0;  ///< id of the image placeholder in prompts
  int64_t bos_token_id = 0;    ///< BOS id

  int64_t vision_hidden_size = 0;  ///< D_v, width of the tower's features (pre-LLM keys)
  int64_t n_vision_layers = 0;     ///< tower layers that run per image
  int64_t image_size = 0;          ///< side of the preprocessed image, pixels (default resolution)
  int64_t num_channels = 0;        ///< input channels of the preprocessed image

  /// FLOPs of one image's encoder and of the decoder's layers (cost/flops.h).
  FlopsSpec flops;

  /// Patches per side of a square grid. @throws ConfigError when the grid is not square.
  int64_t grid_side() const;
  /// The layout of an image at the default size: n_visual_tokens over grid_rows × grid_cols.
  VisualLayout default_layout() const { return {n_visual_tokens, grid_rows, grid_cols}; }
  bool operator==(const ModelShape&) const = default;
};

}  // namespace vispco
