// Patch positions, ViT rotary angles and Qwen2.5-VL windows; see vision_layout.h.
#include "model/qwen2_vl/vision_layout.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace vispco {

namespace {

void check_grid(int64_t t, int64_t h, int64_t w, int64_t m) {
  if (t < 1 || m < 1 || h < m || w < m || h % m != 0 || w % m != 0)
    throw InvalidArgument("Qwen2-VL vision: patch grid " + std::to_string(t) + "×" + std::to_string(h) + "×" +
                          std::to_string(w) + " (t×h×w) with merge size " + std::to_string(m) +
                          " (need t ≥ 1 and h, w positive multiples of the merge size)");
}

}  // namespace

at::Tensor qwen_patch_positions(int64_t grid_t, int64_t grid_h, int64_t grid_w, int64_t m) {
  check_grid(grid_t, grid_h, grid_w, m);
  auto pos = at::empty({grid_t * grid_h * grid_w, 2}, at::kLong);
  auto* p = pos.data_ptr<int64_t>();
  for (int64_t t = 0; t < grid_t; ++t)
    for (int64_t bh = 0; bh < grid_h / m; ++bh)
      for (int64_t bw = 0; bw < grid_w / m; ++bw)
        for (int64_t ih = 0; ih < m; ++ih)
          for (int64_t iw = 0; iw < m; ++iw) {
            *p++ = bh * m + ih;
            *p++ = bw * m + iw;
          }
  return pos;
}

at::Tensor qwen_vision_rotary_angles(const at::Tensor& positions, int64_t head_dim, double theta) {
  TORCH_CHECK(positions.dim() == 2 && positions.size(1) == 2,
              "qwen_vision_rotary_angles: positions must be [N, 2], got ", positions.sizes());
  TORCH_CHECK(head_dim > 0 && head_dim % 4 == 0, "qwen_vision_rotary_angles: head dim ", head_dim,
              " is not a positive multiple of 4");
  const int64_t dim = head_dim / 2;  // VisionRotaryEmbedding(head_dim / 2)
  auto exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / double(dim);
  auto inv_freq = at::pow(theta, exponent).reciprocal().to(at::kDouble);  // [D_h/4], built in fp32
  auto pos = positions.to(at::kCPU, at::kDouble);
  auto rows = pos.select(1, 0).unsqueeze(1) * inv_freq;  // [N, D_h/4]
  auto cols = pos.select(1, 1).unsqueeze(1) * inv_freq;
  return at::cat({rows, cols}, 1);
}

QwenWindows qwen_window_index(int64_t grid_t, int64_t grid_h, int64_t grid_w, int64_t m,
                              int64_t window_merged) {
  check_grid(grid_t, grid_h, grid_w, m);
  if (window_merged < 1)
    throw InvalidArgument("Qwen2.5-VL windows: window side " + std::to_string(window_merged) +
                          " merged tokens (need ≥ 1: window_size ≥ patch_size · spatial_merge_size)");
  const int64_t lh = grid_h / m, lw = grid_w / m, W = window_merged;
  QwenWindows out;
  out.order = at::empty({grid_t * lh * lw}, at::kLong);
  auto* o = out.order.data_ptr<int64_t>();
  for (int64_t t = 0; t < grid_t; ++t)
    for (int64_t r0 = 0; r0 < lh; r0 += W)
      for (int64_t c0 = 0; c0 < lw; c0 += W) {
        const int64_t r1 = std::min(r0 + W, lh), c1 = std::min(c0 + W, lw);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) *o++ = t * lh * lw + r * lw + c;
        out.lengths.push_back((r1 - r0) * (c1 - c0) * m * m);
      }
  return out;
}

}  // namespace vispco
