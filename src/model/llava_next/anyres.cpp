// AnyRes geometry; formulas in anyres.h (transformers v4.52 semantics).
#include "model/llava_next/anyres.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"

namespace vispco {

Resolution select_best_resolution(int64_t height, int64_t width, const std::vector<Resolution>& pinpoints) {
  if (height <= 0 || width <= 0)
    throw InvalidArgument("AnyRes: image size " + std::to_string(width) + "×" + std::to_string(height) +
                          " must be positive");
  const Resolution* best = nullptr;
  int64_t max_effective = 0, min_wasted = std::numeric_limits<int64_t>::max();
  for (const auto& p : pinpoints) {
    // Python floats are IEEE doubles and int() truncates: the same arithmetic as transformers.
    const double scale = std::min(double(p.width) / double(width), double(p.height) / double(height));
    const auto down_w = static_cast<int64_t>(double(width) * scale);
    const auto down_h = static_cast<int64_t>(double(height) * scale);
    const int64_t effective = std::min(down_w * down_h, width * height);
    const int64_t wasted = p.width * p.height - effective;
    if (effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      max_effective = effective;
      min_wasted = wasted;
      best = &p;
    }
  }
  if (best == nullptr) throw InvalidArgument("AnyRes: no image_grid_pinpoints to choose from");
  return *best;
}

AnyresCanvas anyres_canvas(int64_t height, int64_t width, Resolution best) {
  AnyresCanvas c;
  c.canvas = best;
  const double scale_w = double(best.width) / double(width), scale_h = double(best.height) / double(height);
  if (scale_w < scale_h) {
    c.resized.width = best.width;
    c.resized.height = std::min(static_cast<int64_t>(std::ceil(double(height) * scale_w)), best.height);
  } else {
    c.resized.height = best.height;
    c.resized.width = std::min(static_cast<int64_t>(std::ceil(double(width) * scale_h)), best.width);
  }
  c.top = (best.height - c.resized.height) / 2;
  c.left = (best.width - c.resized.width) / 2;
  return c;
}

UnpadExtent unpad_extent(int64_t orig_h, int64_t orig_w, int64_t cur_h, int64_t cur_w) {
  auto round7 = [](double x) { return static_cast<int64_t>(std::nearbyint(x * 1e7) / 1e7); };
  UnpadExtent e{0, cur_h, 0, cur_w};
  if (double(orig_w) / double(orig_h) > double(cur_w) / double(cur_h)) {
    const int64_t new_h = round7(double(orig_h) * (double(cur_w) / double(orig_w)));
    const int64_t pad = (cur_h - new_h) / 2;
    e.row0 = pad;
    e.n_rows = cur_h - 2 * pad;
  } else {
    const int64_t new_w = round7(double(orig_w) * (double(cur_h) / double(orig_h)));
    const int64_t pad = (cur_w - new_w) / 2;
    e.col0 = pad;
    e.n_cols = cur_w - 2 * pad;
  }
  return e;
}

VisualLayout AnyresGeometry::layout() const { return {n_tokens(), unpad.n_rows, unpad.n_cols + 1}; }

AnyresGeometry anyres_geometry(int64_t height, int64_t width, const LlavaNextConfig& cfg) {
  const int64_t s = cfg.llava.vision.image_size;
  AnyresGeometry g;
  g.canvas = anyres_canvas(height, width, select_best_resolution(height, width, cfg.image_grid_pinpoints));
  g.tile_rows = g.canvas.canvas.height / s;
  g.tile_cols = g.canvas.canvas.width / s;
  g.grid = cfg.grid();
  g.unpad = unpad_extent(height, width, g.tile_rows * g.grid, g.tile_cols * g.grid);
  return g;
}

VisualLayout anyres_largest_layout(const LlavaNextConfig& cfg) {
  const int64_t s = cfg.llava.vision.image_size, n = cfg.grid();
  VisualLayout best;
  for (const auto& p : cfg.image_grid_pinpoints) {
    const int64_t rows = p.height / s * n, cols = p.width / s * n + 1;
    if (n * n + rows * cols > best.n_tokens) best = {n * n + rows * cols, rows, cols};
  }
  return best;
}

int64_t anyres_max_tiles(const LlavaNextConfig& cfg) {
  const int64_t s = cfg.llava.vision.image_size;
  int64_t most = 0;
  for (const auto& p : cfg.image_grid_pinpoints) most = std::max(most, (p.height / s) * (p.width / s));
  return most;
}

}  // namespace vispco
