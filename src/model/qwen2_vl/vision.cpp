// Qwen2-VL / Qwen2.5-VL vision tower and patch merger; see vision.h.
#include "model/qwen2_vl/vision.h"

#include <ATen/ATen.h>

#include "model/blocks.h"
#include "model/quant.h"
#include "model/qwen2_vl/vision_layout.h"

namespace vispco {

QwenPatchMergerImpl::QwenPatchMergerImpl(const Qwen2VisionConfig& cfg)
    : unit(cfg.spatial_merge_size * cfg.spatial_merge_size) {
  const int64_t in = unit * cfg.embed_dim;
  ln_q = register_module("ln_q", QwenVisionNorm(cfg.embed_dim, cfg.eps, cfg.windowed_rms_swiglu()));
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  fc1 = mlp->register_module("0", torch::nn::Linear(in, in));
  fc2 = mlp->register_module("2", torch::nn::Linear(in, cfg.out_hidden_size));
}

at::Tensor QwenPatchMergerImpl::forward(const at::Tensor& x) {
  auto h = ln_q(x).reshape({-1, unit * x.size(1)});  // [N_v, m²·E]
  return linear_forward(fc2, activation(linear_forward(fc1, h), "gelu"));
}

Qwen2VisionTransformerImpl::Qwen2VisionTransformerImpl(const Qwen2VisionConfig& c) : cfg(c) {
  cfg.validate();
  auto patch_embed = register_module("patch_embed", std::make_shared<torch::nn::Module>());
  const auto kernel = torch::ExpandingArray<3>({cfg.temporal_patch_size, cfg.patch_size, cfg.patch_size});
  proj = patch_embed->register_module(
      "proj",
      torch::nn::Conv3d(
          torch::nn::Conv3dOptions(cfg.in_channels, cfg.embed_dim, kernel).stride(kernel).bias(false)));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.depth; ++i) blocks->push_back(QwenVisionBlock(cfg));
  merger = register_module("merger", QwenPatchMerger(cfg));
}

at::Tensor Qwen2VisionTransformerImpl::forward(const at::Tensor& pixel_values, int64_t grid_t, int64_t grid_h,
                                               int64_t grid_w, QwenAttentionSignal* signal) {
  const int64_t m = cfg.spatial_merge_size, unit = m * m;
  const auto positions = qwen_patch_positions(grid_t, grid_h, grid_w, m);  // checks the grid
  const int64_t n = grid_t * grid_h * grid_w;
  TORCH_CHECK(
      pixel_values.dim() == 2 && pixel_values.size(0) == n && pixel_values.size(1) == cfg.patch_values(),
      "Qwen2-VL vision tower: expected pixel_values [", n, ", ", cfg.patch_values(), "] for the ", grid_t,
      "×", grid_h, "×", grid_w, " patch grid, got ", pixel_values.sizes());
  const auto& w = proj->weight;  // [E, C, T, P, P]
  auto x = at::linear(pixel_values.to(w.device(), w.scalar_type()), w.reshape({w.size(0), -1}));  // [N_p, E]

  auto angles = qwen_vision_rotary_angles(positions, cfg.head_dim());  // [N_p, D_h/2] float64, CPU
  const std::vector<int64_t> frames(grid_t, grid_h * grid_w);  // full attention: each frame on its own
  std::vector<int64_t> windows = frames;
  at::Tensor window_order;  // [N_v] merged tokens window by window, Qwen2.5-VL only
  if (cfg.windowed_rms_swiglu()) {
    auto win = qwen_window_index(grid_t, grid_h, grid_w, m, cfg.window_merged());
    windows = std::move(win.lengths);
    window_order = win.order;
    auto patch_order = (window_order.unsqueeze(1) * unit + at::arange(unit, at::kLong)).view(-1);  // [N_p]
    angles = angles.index_select(0, patch_order);
    x = x.index_select(0, patch_order.to(x.device()));
    window_order = window_order.to(x.device());
  }
  auto emb = at::cat({angles, angles}, 1);  // [N_p, D_h]
  const QwenVisionRotary rot{emb.cos().to(x.device(), at::kFloat), emb.sin().to(x.device(), at::kFloat)};

  QwenAttentionSignal last;  // per patch, in the blocks' order (signal only)
  for (int64_t i = 0; i < cfg.depth; ++i)
    x = blocks[i]->as<QwenVisionBlockImpl>()->forward(
        x, rot, cfg.full_attention_block(i) ? frames : windows,
        signal != nullptr && i == cfg.depth - 1 ? &last : nullptr);
  if (signal != nullptr) {
    signal->received = qwen_merged_token_mean(last.received, unit, window_order);              // [N_v]
    signal->keys = qwen_merged_token_mean(last.keys, unit, window_order).to(x.scalar_type());  // [N_v, E]
  }
  return qwen_merged_grid_order(merger->forward(x), window_order);  // [N_v, D]
}

std::vector<std::string> qwen_visual_checkpoint_keys(const std::string& name) {
  return {"visual." + name, "model.visual." + name};
}

}  // namespace vispco
