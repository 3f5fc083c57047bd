// The square token panel of fixed-size families (see token_panels.h).
#include "model/token_panels.h"

#include <algorithm>

namespace vispco {

TokenPanel square_token_panel(int64_t height, int64_t width, int64_t rows, int64_t cols, bool pad_to_square) {
  const double side = double(pad_to_square ? std::max(height, width) : std::min(height, width));
  TokenPanel p;
  p.rows = rows;
  p.cols = cols;
  p.stride = cols;
  p.x0 = (double(width) - side) / 2;
  p.y0 = (double(height) - side) / 2;
  p.width = p.height = side;
  p.square = true;
  return p;
}

}  // namespace vispco
