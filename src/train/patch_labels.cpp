// Per-patch labels of a SynthVQA scene.
#include "train/patch_labels.h"

#include <ATen/ATen.h>

#include <cstring>

namespace vispco::train {

using namespace eval::synthvqa;

at::Tensor patch_labels(const Scene& scene, int64_t grid) {
  const double cell = double(kImageSize) / grid;
  auto out = at::zeros({grid * grid, 6}, at::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (int64_t r = 0; r < grid; ++r)
    for (int64_t c = 0; c < grid; ++c) {
      const double px = (c + 0.5) * cell, py = (r + 0.5) * cell;
      const int64_t p = r * grid + c;
      for (const auto& o : scene.objects) {  // draw order: later objects on top
        const double dx = px - o.x, dy = py - o.y, rr = 0.75 * o.radius;
        if (dx * dx + dy * dy <= rr * rr) {
          a[p][0] = static_cast<int64_t>(o.colour) + 1;
          a[p][1] = static_cast<int64_t>(o.shape) + 1;
          a[p][2] = static_cast<int64_t>(o.size) + 1;
        }
      }
      for (const auto& t : scene.texts) {
        if (px < t.x || px >= t.x + t.w || py < t.y || py >= t.y + t.h || t.text.empty()) continue;
        const auto i = static_cast<size_t>((px - t.x) / t.w * t.text.size());
        const char* hit = std::strchr(kTextAlphabet, t.text[std::min(i, t.text.size() - 1)]);
        a[p][4] = hit != nullptr ? (hit - kTextAlphabet) + 1 : 0;
        for (size_t k = 0; k < ink_table().size(); ++k)
          if (t.color == ink_table()[k].name) a[p][5] = static_cast<int64_t>(k) + 1;
      }
    }
  for (const auto& o : scene.objects) {
    const int64_t r = std::min<int64_t>(grid - 1, int64_t(o.y / cell)), c = std::min<int64_t>(grid - 1, int64_t(o.x / cell));
    a[r * grid + c][3] = 1;
  }
  return out;
}

}  // namespace vispco::train
