// AnyRes views of SynthVQA-HR images and their per-patch labels (see hr_views.h).
#include "train/hr/hr_views.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace vispco::train {

using namespace eval::synthvqa;

std::vector<HrView> hr_views(const Scene& scene, int64_t side) {
  if (side <= 0 || scene.width % side != 0 || scene.height % side != 0)
    throw InvalidArgument("hr_views: a " + std::to_string(scene.width) + "×" + std::to_string(scene.height) +
                          " canvas is not a whole number of " + std::to_string(side) + "-px tiles");
  std::vector<HrView> out{{0, 0, double(scene.width) / side, double(scene.height) / side}};
  for (int64_t i = 0; i < scene.height / side; ++i)
    for (int64_t j = 0; j < scene.width / side; ++j)
      out.push_back({double(j * side), double(i * side), 1, 1});
  return out;
}

at::Tensor hr_patch_labels(const Scene& scene, const HrView& view, int64_t grid, int64_t side) {
  const double cell = double(side) / grid;
  auto out = at::zeros({grid * grid, 6}, at::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (int64_t r = 0; r < grid; ++r)
    for (int64_t c = 0; c < grid; ++c) {
      const double px = view.x0 + (c + 0.5) * cell * view.sx, py = view.y0 + (r + 0.5) * cell * view.sy;
      const int64_t p = r * grid + c;
      for (const auto& o : scene.objects) {  // the last covering object is the one drawn on top
        const double dx = px - o.x, dy = py - o.y, rr = 0.75 * o.radius;
        if (dx * dx + dy * dy > rr * rr) continue;
        a[p][0] = static_cast<int64_t>(o.colour) + 1;
        a[p][1] = static_cast<int64_t>(o.shape) + 1;
        a[p][2] = static_cast<int64_t>(o.size) + 1;
      }
      for (const auto& t : scene.texts) {
        if (t.text.empty() || t.font_px / std::max(view.sx, view.sy) < kMinLabelledCapPx) continue;
        if (px < t.x || px >= t.x + t.w || py < t.y || py >= t.y + t.h) continue;
        const auto i = static_cast<size_t>((px - t.x) / t.w * t.text.size());
        const char* hit = std::strchr(kTextAlphabet, t.text[std::min(i, t.text.size() - 1)]);
        a[p][4] = hit != nullptr ? (hit - kTextAlphabet) + 1 : 0;
        for (size_t k = 0; k < ink_table().size(); ++k)
          if (t.color == ink_table()[k].name) a[p][5] = static_cast<int64_t>(k) + 1;
      }
    }
  for (const auto& o : scene.objects) {  // the patch whose canvas area holds the centre, if in this view
    const double u = (o.x - view.x0) / view.sx / cell, v = (o.y - view.y0) / view.sy / cell;
    if (u < 0 || v < 0 || u >= grid || v >= grid) continue;
    a[static_cast<int64_t>(v) * grid + static_cast<int64_t>(u)][3] = 1;
  }
  return out;
}

}  // namespace vispco::train
