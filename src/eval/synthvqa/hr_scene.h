// SynthVQA-HR geometry: the canvases (image sizes equal to LLaVA-NeXT's image_grid_pinpoints at 336 px, so
// AnyRes cuts them into whole 336-px tiles with no resize or padding), the tile grid, and the counts and
// sizes of a high-resolution scene. Reference: LLaVA-NeXT (Liu et al. 2024), transformers llava_next
// select_best_resolution / divide_to_patches.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "eval/synthvqa/rng.h"

namespace vispco::eval::synthvqa {

/// Side of one AnyRes tile and of the resized base view, pixels (CLIP ViT-L/14-336's input).
inline constexpr int kHrTileSize = 336;

/// One canvas: image width × height in pixels (multiples of kHrTileSize) and its relative frequency.
struct HrCanvas {
  int width = 0;   ///< pixels, 336–1008
  int height = 0;  ///< pixels, 336–1008
  int weight = 0;  ///< relative frequency (integer); the table's weights sum to kHrCanvasWeightTotal
  /// "<width>x<height>", e.g. "672x336".
  std::string name() const;
  /// Tiles across and down (width / 336, height / 336).
  int n_cols() const { return width / kHrTileSize; }
  int n_rows() const { return height / kHrTileSize; }
};

/// The canvas registry: 672×672 (weight 4: the ~2,900-token case), 672×336, 336×672, 1008×336 and 336×1008
/// (weight 1 each), i.e. the pinpoints [[336,672],[672,336],[672,672],[1008,336],[336,1008]] (H, W) as W×H.
const std::vector<HrCanvas>& hr_canvas_table();
/// Sum of hr_canvas_table()'s weights.
inline constexpr int kHrCanvasWeightTotal = 8;
/// One canvas drawn with the table's weights (one rng draw).
const HrCanvas& pick_canvas(Rng& rng);

/// Large objects per scene (size class "large", radius 25–32 px: visible in the base view).
inline constexpr int kHrMinLarge = 4, kHrMaxLarge = 6;
/// Tiny objects per scene (size class "tiny", radius 6–8 px: 12–16 px across at full resolution, about one
/// 14-px ViT patch of a tile; 6–8 px along a halved axis of the base view, 4–5 px along a third-scaled one;
/// drawn with a 1-px outline instead of 2).
inline constexpr int kHrMinTiny = 5, kHrMaxTiny = 8;
/// Nominal cap height of every SynthVQA-HR string, pixels at full resolution (render.h measure_text): 8–10,
/// i.e. 4–5 px along a halved axis of the base view, 2.7–3.3 px along a third-scaled one.
inline constexpr int kHrMinTextPx = 8, kHrMaxTextPx = 10;
/// Characters of a string a question asks about (the text family cycles them) and of other strings.
inline constexpr int kHrMinTextLength = 2, kHrMaxTextLength = 3;

/// Smallest gap between tiny objects and strings and the tile lines (x or y a multiple of 336), pixels: tiny
/// objects and strings lie wholly inside one tile. Large objects may straddle tiles.
inline constexpr int kHrTileMargin = 3;
/// Smallest gap between the footprint circles of two objects, pixels (objects never overlap).
inline constexpr int kHrObjectGap = 8;
/// Smallest gap between an object's footprint circle and a string's box, pixels.
inline constexpr int kHrTextGap = 4;
/// Smallest gap between two strings' boxes, pixels.
inline constexpr int kHrTextTextGap = 8;

/// True when the pixel interval [lo, hi) lies inside one tile with kHrTileMargin pixels to spare on both
/// sides (lo − margin ≥ tile start, hi + margin ≤ tile end). Requires lo ≥ kHrTileMargin.
bool inside_one_tile(int lo, int hi);

}  // namespace vispco::eval::synthvqa
