// Per-patch labels of a SynthVQA scene.
#include "train/patch_labels.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace vispco::train {

using namespace eval::synthvqa;

namespace {

// Index of the top-most object covering patch (r, c) — its centre within 0.75 of the circumradius, later
// objects drawn on top — or −1.
int covering_object(const Scene& scene, int64_t r, int64_t c, double cell) {
  const double px = (c + 0.5) * cell, py = (r + 0.5) * cell;
  int top = -1;
  for (size_t i = 0; i < scene.objects.size(); ++i) {
    const auto& o = scene.objects[i];
    const double dx = px - o.x, dy = py - o.y, rr = 0.75 * o.radius;
    if (dx * dx + dy * dy <= rr * rr) top = static_cast<int>(i);
  }
  return top;
}

int64_t centre_patch(const SceneObject& o, int64_t grid, double cell) {
  const int64_t r = std::min<int64_t>(grid - 1, int64_t(o.y / cell)),
                c = std::min<int64_t>(grid - 1, int64_t(o.x / cell));
  return r * grid + c;
}

}  // namespace

at::Tensor patch_labels(const Scene& scene, int64_t grid) {
  const double cell = double(kImageSize) / grid;
  auto out = at::zeros({grid * grid, 6}, at::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (int64_t r = 0; r < grid; ++r)
    for (int64_t c = 0; c < grid; ++c) {
      const double px = (c + 0.5) * cell, py = (r + 0.5) * cell;
      const int64_t p = r * grid + c;
      if (const int top = covering_object(scene, r, c, cell); top >= 0) {
        const auto& o = scene.objects[static_cast<size_t>(top)];
        a[p][0] = static_cast<int64_t>(o.colour) + 1;
        a[p][1] = static_cast<int64_t>(o.shape) + 1;
        a[p][2] = static_cast<int64_t>(o.size) + 1;
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
  for (const auto& o : scene.objects) a[centre_patch(o, grid, cell)][3] = 1;
  return out;
}

std::vector<int64_t> object_patches(const Scene& scene, size_t object, int64_t grid) {
  if (object >= scene.objects.size())
    throw InvalidArgument("object_patches: object " + std::to_string(object) + " of a scene with " +
                          std::to_string(scene.objects.size()) + " objects");
  const double cell = double(kImageSize) / grid;
  std::vector<int64_t> out;
  const int64_t centre = centre_patch(scene.objects[object], grid, cell);
  for (int64_t r = 0; r < grid; ++r)
    for (int64_t c = 0; c < grid; ++c)
      if (r * grid + c == centre || covering_object(scene, r, c, cell) == static_cast<int>(object))
        out.push_back(r * grid + c);
  return out;
}

int64_t object_centre_patch(const Scene& scene, size_t object, int64_t grid) {
  if (object >= scene.objects.size())
    throw InvalidArgument("object_centre_patch: object " + std::to_string(object) + " of a scene with " +
                          std::to_string(scene.objects.size()) + " objects");
  return centre_patch(scene.objects[object], grid, double(kImageSize) / grid);
}

std::vector<std::vector<int64_t>> glyph_patches(const Scene& scene, size_t text, int64_t grid) {
  if (text >= scene.texts.size())
    throw InvalidArgument("glyph_patches: string " + std::to_string(text) + " of a scene with " +
                          std::to_string(scene.texts.size()) + " strings");
  const auto& t = scene.texts[text];
  const double cell = double(kImageSize) / grid, share = t.w / double(std::max<size_t>(1, t.text.size()));
  std::vector<std::vector<int64_t>> out(t.text.size());
  for (size_t k = 0; k < t.text.size(); ++k) {
    const double x0 = t.x + k * share, x1 = x0 + share;
    for (int64_t r = 0; r < grid; ++r)
      for (int64_t c = 0; c < grid; ++c) {
        const double px = (c + 0.5) * cell, py = (r + 0.5) * cell;
        if (px >= x0 && px < x1 && py >= t.y && py < t.y + t.h) out[k].push_back(r * grid + c);
      }
    if (out[k].empty()) {  // narrower than a patch: the patch under the share's centre
      const double cx = (x0 + x1) / 2, cy = t.y + t.h / 2.0;
      out[k].push_back(std::min<int64_t>(grid - 1, int64_t(cy / cell)) * grid +
                       std::min<int64_t>(grid - 1, int64_t(cx / cell)));
    }
  }
  return out;
}

at::Tensor patch_extra_labels(const Scene& scene, int64_t grid) {
  const double cell = double(kImageSize) / grid;
  auto out = at::zeros({grid * grid, 3}, at::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (size_t i = 0; i < scene.objects.size(); ++i) {
    const auto& o = scene.objects[i];
    int64_t same_colour = 0, same_shape = 0;
    for (const auto& u : scene.objects) {
      same_colour += u.colour == o.colour;
      same_shape += u.shape == o.shape;
    }
    for (int64_t p : object_patches(scene, i, grid)) {
      a[p][0] = std::min(same_colour, PatchExtraSizes::kMaxCount);
      a[p][1] = std::min(same_shape, PatchExtraSizes::kMaxCount);
    }
  }
  for (const auto& t : scene.texts)
    for (int64_t r = 0; r < grid; ++r)
      for (int64_t c = 0; c < grid; ++c) {
        const double px = (c + 0.5) * cell, py = (r + 0.5) * cell;
        if (px < t.x || px >= t.x + t.w || py < t.y || py >= t.y + t.h || t.text.empty()) continue;
        const auto i = std::min(static_cast<size_t>((px - t.x) / t.w * t.text.size()), t.text.size() - 1);
        a[r * grid + c][2] = std::min<int64_t>(static_cast<int64_t>(i) + 1, PatchExtraSizes::kGlyphIndex - 1);
      }
  return out;
}

at::Tensor patch_positions(int64_t grid) {
  if (grid < 2) throw InvalidArgument("patch_positions: grid must be ≥ 2, got " + std::to_string(grid));
  auto line = at::linspace(-1.0, 1.0, grid, at::kFloat);
  auto col = line.repeat({grid}), row = line.repeat_interleave(grid);  // row-major: column varies fastest
  return at::stack({col, row}, 1);
}

}  // namespace vispco::train
