// FLOPs of the Qwen2-VL / Qwen2.5-VL vision tower; see vision_flops.h.
#include "model/qwen2_vl/vision_flops.h"

#include <algorithm>
#include <numeric>

#include "model/qwen2_vl/vision_layout.h"

namespace vispco {

double QwenVisionFlops::total() const {
  return std::accumulate(blocks.begin(), blocks.end(), patch_embed + merger);
}

QwenVisionFlops qwen_vision_flops(const Qwen2VisionConfig& cfg, int64_t grid_t, int64_t grid_h,
                                  int64_t grid_w) {
  const int64_t m = cfg.spatial_merge_size;
  const double n = double(grid_t * grid_h * grid_w), e = double(cfg.embed_dim),
               i = double(cfg.intermediate_size), unit = double(m * m);
  auto squares = [](const std::vector<int64_t>& lengths) {
    double s = 0;
    for (const auto l : lengths) s += double(l) * double(l);
    return s;
  };
  const std::vector<int64_t> frames(grid_t, grid_h * grid_w);
  const double full = squares(frames);
  // The layout the forward uses: checks the grid, and gives Qwen2.5-VL's window lengths.
  const auto layout = qwen_window_index(grid_t, grid_h, grid_w, m, std::max<int64_t>(cfg.window_merged(), 1));
  const double windowed = cfg.windowed_rms_swiglu() ? squares(layout.lengths) : full;
  QwenVisionFlops f;
  f.patch_embed = 2 * n * double(cfg.patch_values()) * e;
  const double mlp = (cfg.windowed_rms_swiglu() ? 6 : 4) * n * e * i;
  for (int64_t b = 0; b < cfg.depth; ++b) {
    const bool is_full = cfg.full_attention_block(b);
    f.full_attention.push_back(is_full);
    f.blocks.push_back(2 * n * e * 3 * e + 2 * n * e * e + 4 * e * (is_full ? full : windowed) + mlp);
  }
  const double n_v = n / unit, wide = unit * e;
  f.merger = 2 * n_v * wide * wide + 2 * n_v * wide * double(cfg.out_hidden_size);
  return f;
}

}  // namespace vispco
