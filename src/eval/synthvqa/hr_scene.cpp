// SynthVQA-HR canvas table and tile geometry.
#include "eval/synthvqa/hr_scene.h"

namespace vispco::eval::synthvqa {

std::string HrCanvas::name() const { return std::to_string(width) + "x" + std::to_string(height); }

const std::vector<HrCanvas>& hr_canvas_table() {
  static const std::vector<HrCanvas> t{
      {672, 672, 4}, {672, 336, 1}, {336, 672, 1}, {1008, 336, 1}, {336, 1008, 1},
  };
  return t;
}

const HrCanvas& pick_canvas(Rng& rng) {
  int r = rng.uniform_int(0, kHrCanvasWeightTotal - 1);
  for (const HrCanvas& c : hr_canvas_table()) {
    if (r < c.weight) return c;
    r -= c.weight;
  }
  return hr_canvas_table().back();  // unreachable: the weights sum to kHrCanvasWeightTotal
}

bool inside_one_tile(int lo, int hi) {
  return (lo - kHrTileMargin) / kHrTileSize == (hi - 1 + kHrTileMargin) / kHrTileSize;
}

}  // namespace vispco::eval::synthvqa
