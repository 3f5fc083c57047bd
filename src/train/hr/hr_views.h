// The AnyRes views of a SynthVQA-HR image and their dense per-patch labels, for training the tower of the
// bundled high-resolution model: LLaVA-NeXT shows the tower the whole image squashed to one 336-px square
// (the base view) and then each 336-px tile at full resolution (transformers v4.52 LlavaNextImageProcessor
// get_image_patches; SynthVQA-HR canvases equal the pinpoints, so tiles are exact crops with no resize or
// padding). The labels follow train/patch_labels.h's rules in canvas coordinates, with a fourth size class.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "eval/synthvqa/scene.h"

namespace vispco::train {

/// One view of a canvas: view pixel (u, v), u, v ∈ [0, side), shows canvas pixel (x0 + u·sx, y0 + v·sy).
struct HrView {
  double x0 = 0, y0 = 0;  ///< canvas pixel of the view's top-left corner
  double sx = 1,
         sy = 1;  ///< canvas pixels per view pixel along x and y (1 for tiles; W/side, H/side for base)
  bool operator==(const HrView&) const = default;
};

/// The views the tower sees of a scene, in LLaVA-NeXT's order: the base view, then the tiles row-major
/// (tile t = i·cols + j covers canvas [j·side, (j+1)·side) × [i·side, (i+1)·side)).
/// @param side the tile side in pixels (the tower's image_size). @throws InvalidArgument when the canvas is
/// not a whole number of tiles.
std::vector<HrView> hr_views(const eval::synthvqa::Scene& scene, int64_t side);

/// Classes of the HR tower's label heads (class 0 = nothing there): patch_labels.h's, with size none +
/// small, large, tiny (SizeClass order).
struct HrPatchLabelSizes {
  static constexpr int64_t kColour = 9, kShape = 7, kSize = 4, kCentre = 2, kChar = 26, kInk = 6;
  static constexpr int64_t kTotal = kColour + kShape + kSize + kCentre + kChar + kInk;
};

/// Cap height, in view pixels, below which a string's characters are not labelled in a view (the glyphs are
/// then 2–5 px tall: SynthVQA-HR strings in the base view, which the benchmark makes illegible on purpose).
inline constexpr double kMinLabelledCapPx = 6.0;

/// Labels of one view. @param grid patches per side (24 for 336 px, patch 14) @param side view side, pixels.
/// @return int64 [grid², 6]: columns colour, shape, size, centre, char, ink. Patch (r, c)'s centre maps to
/// the canvas point (x0 + (c + ½)·cell·sx, y0 + (r + ½)·cell·sy), cell = side / grid; an object covers the
/// patch when that point lies within 0.75 of its circumradius (the later-drawn object wins); a string's box
/// is split evenly among its characters (char and ink only where its cap height over the view's larger scale,
/// font_px / max(sx, sy), is ≥ kMinLabelledCapPx); the centre column marks the patch whose canvas area holds
/// an object's centre.
at::Tensor hr_patch_labels(const eval::synthvqa::Scene& scene, const HrView& view, int64_t grid,
                           int64_t side);

}  // namespace vispco::train
