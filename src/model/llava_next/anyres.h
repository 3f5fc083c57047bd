// AnyRes geometry of LLaVA-NeXT, as transformers v4.52 computes it (image_processing_utils.py
// select_best_resolution and get_patch_output_size; image_processing_llava_next.py _pad_for_patching and
// divide_to_patches; modeling_llava_next.py get_anyres_image_grid_shape, image_size_to_num_patches and
// unpad_image): the pinpoint an image is tiled at, the size it is resized to and where it sits on the padded
// canvas, the tiles, the rows or columns of the feature grid that unpadding keeps, and so the image's
// visual-token layout. Plain integers; no tensors.
#pragma once
#include <cstdint>
#include <vector>

#include "model/llava_next/config.h"
#include "model/shape.h"

namespace vispco {

/// transformers select_best_resolution for an image of height × width pixels: the pinpoint with the largest
/// effective resolution min(⌊w·s⌋·⌊h·s⌋, w·h), s = min(W/w, H/h) (the image scaled to fit, never counted
/// above its own pixels); ties go to the least waste W·H − effective, then to the first listed. An image so
/// thin that no pinpoint keeps a pixel of it (effective 0 everywhere) gets the least wasteful one, as in
/// transformers. @throws InvalidArgument for a non-positive size or no pinpoints.
Resolution select_best_resolution(int64_t height, int64_t width, const std::vector<Resolution>& pinpoints);

/// The image on its padded canvas (transformers get_patch_output_size + _pad_for_patching).
struct AnyresCanvas {
  Resolution canvas;   ///< the best resolution: the padded image's size
  Resolution resized;  ///< the image resized keeping its aspect ratio: the side of the smaller scale fills
                       ///< the canvas, the other is ⌈side · scale⌉ (at most the canvas)
  int64_t top = 0;   ///< padding rows above the image, ⌊(canvas − resized) / 2⌋; the odd one goes below
  int64_t left = 0;  ///< padding columns left of the image, likewise; the odd one goes right
  bool operator==(const AnyresCanvas&) const = default;
};

/// Where an image of height × width pixels lands on the canvas of `best` (get_patch_output_size).
AnyresCanvas anyres_canvas(int64_t height, int64_t width, Resolution best);

/// The part of a padded feature grid that unpad_image keeps: rows [row0, row0 + n_rows) × columns
/// [col0, col0 + n_cols).
struct UnpadExtent {
  int64_t row0 = 0, n_rows = 0, col0 = 0, n_cols = 0;
  bool operator==(const UnpadExtent&) const = default;
};

/// transformers unpad_image on a cur_h × cur_w feature grid of an image of orig_h × orig_w pixels: when the
/// image is wider than the grid (w/h > cur_w/cur_h) the rows are trimmed: new_h = int(round(h · cur_w / w,
/// 7)), padding p = (cur_h − new_h) // 2 rows off the top and the bottom each (so an odd difference keeps
/// new_h + 1 rows); otherwise the columns likewise. round(·, 7) is done as nearbyint(x·10⁷)/10⁷ (it only
/// removes floating-point noise below an integer).
UnpadExtent unpad_extent(int64_t orig_h, int64_t orig_w, int64_t cur_h, int64_t cur_w);

/// Everything about one image's tiles and tokens.
struct AnyresGeometry {
  AnyresCanvas canvas;
  int64_t tile_rows = 0;  ///< tiles per canvas column (canvas.height / image_size)
  int64_t tile_cols = 0;  ///< tiles per canvas row; tiles are numbered row-major, t = i·tile_cols + j
  int64_t grid = 0;       ///< n, features per tile side (image_size / patch_size)
  UnpadExtent unpad;      ///< on the (tile_rows·n) × (tile_cols·n) feature grid of the tiles

  /// Tiles through the tower besides the base image.
  int64_t n_tiles() const { return tile_rows * tile_cols; }
  /// Base-image tokens, n².
  int64_t n_base() const { return grid * grid; }
  /// N_v = n² + rows · (cols + 1): the base image, then each kept feature row followed by image_newline.
  int64_t n_tokens() const { return n_base() + unpad.n_rows * (unpad.n_cols + 1); }
  /// The image's VisualLayout: N_v over the high-resolution part's grid, unpad.n_rows × (unpad.n_cols + 1)
  /// (newline column included). Grid index g (the token's place in the image's span, TokenState::grid_index)
  /// means: g < n² the base image's patch (g / n, g % n); g ≥ n² the high-resolution feature
  /// (r, c) = divmod(g − n², cols) of the unpadded grid, c = cols − 1 being row r's image_newline.
  /// grid_rows · grid_cols = N_v − n² ≠ N_v: scorers that need N_v = rows·cols (pool) refuse the image.
  VisualLayout layout() const;
  bool operator==(const AnyresGeometry&) const = default;
};

/// The geometry of an image of height × width pixels under `cfg` (validated).
/// @throws InvalidArgument as select_best_resolution.
AnyresGeometry anyres_geometry(int64_t height, int64_t width, const LlavaNextConfig& cfg);

/// The largest N_v any image can make: the maximum over the pinpoints of n² + (H/S·n)·(W/S·n + 1) (an image
/// of exactly that pinpoint's size chooses it and loses nothing to unpadding), and the layout it has.
VisualLayout anyres_largest_layout(const LlavaNextConfig& cfg);
/// The most tiles any image makes: the maximum over the pinpoints of (H/S)·(W/S).
int64_t anyres_max_tiles(const LlavaNextConfig& cfg);

}  // namespace vispco
