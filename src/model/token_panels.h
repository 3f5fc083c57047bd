// Where an image's visual tokens lie on the image, for drawing them (token heat-maps): one panel per view the
// encoder made tokens of — LLaVA-1.5's one patch grid over the padded square; LLaVA-NeXT's base view (the
// whole image squashed to a square) and its high-resolution grid over the unpadded image, with the tile
// lines.
#pragma once
#include <cstdint>
#include <vector>

namespace vispco {

/// One grid of an image's visual tokens, placed on the original image.
struct TokenPanel {
  int64_t first = 0;  ///< index in the image's N_v of the token at cell (0, 0)
  int64_t rows = 0;   ///< cells down
  int64_t cols = 0;   ///< cells across
  int64_t stride =
      0;  ///< token index step from one row to the next (cols, or cols + 1 past a row-end newline)
  /// The cells' rectangle in original image pixels (x right, y down); it may extend past the image (padding).
  double x0 = 0, y0 = 0, width = 0, height = 0;
  /// Drawn as a square (the encoder saw the rectangle resized to a square), not at the rectangle's aspect.
  bool square = false;
  /// Tile boundaries inside the rectangle, original image pixels (vertical lines at x, horizontal at y).
  std::vector<double> x_lines, y_lines;
  /// Token index of cell (r, c).
  int64_t token(int64_t r, int64_t c) const { return first + r * stride + c; }
};

/// The one panel of a fixed-size family: rows × cols cells over the square the preprocessor makes of a
/// height × width image — padded to max(height, width) around the centre when `pad_to_square`, else the
/// centre crop of side min(height, width) (CLIP's resize + centre crop) — drawn square.
TokenPanel square_token_panel(int64_t height, int64_t width, int64_t rows, int64_t cols, bool pad_to_square);

}  // namespace vispco
