// The Qwen2-VL / Qwen2.5-VL vision tower (transformers v4.55 Qwen2VisionTransformerPretrainedModel,
// modeling_qwen2_vl.py, and Qwen2_5_VisionTransformerPretrainedModel, modeling_qwen2_5_vl.py): patch
// embedding (a Conv3d with kernel = stride, done as one matmul), 2-D rotary ViT blocks (model/qwen2_vl/
// vision_blocks.h; Qwen2.5-VL's windows from vision_layout.h), and the patch merger (norm, m² consecutive
// patches concatenated, Linear → GELU → Linear) giving the visual tokens in the LLM's width. Parameter names
// are the checkpoint keys under "visual." (or "model.visual." in transformers ≥ 4.52's layout).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "model/qwen2_vl/vision_blocks.h"
#include "model/qwen2_vl/vision_config.h"

namespace vispco {

/// PatchMerger: ln_q over [N_p, E] (LayerNorm with bias for Qwen2-VL, RMSNorm for Qwen2.5-VL, eps 1e-6), then
/// each m² consecutive rows (one m × m block in merge-blocked order) concatenated to [N_v, m²·E] →
/// mlp.0 [m²E, m²E] → GELU (erf) → mlp.2 [D, m²E], all with biases.
struct QwenPatchMergerImpl : torch::nn::Module {
  explicit QwenPatchMergerImpl(const Qwen2VisionConfig& cfg);
  /// @param x [N_p, E], N_p a multiple of m² @return [N_p / m², D], dtype of x.
  at::Tensor forward(const at::Tensor& x);
  QwenVisionNorm ln_q{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};  // registered as mlp.0 / mlp.2
  int64_t unit;                                  // m²
};
TORCH_MODULE(QwenPatchMerger);

/// The whole tower. One image per call: a batch of images is a list of calls (their N_v differ; nothing is
/// padded), whose outputs the caller concatenates or keeps apart.
///
/// Attention: Qwen2-VL's blocks attend over the whole frame (t·h·w patches: every frame on its own, as
/// transformers' cu_seqlens; t = 1 for an image); Qwen2.5-VL reorders the patches window by window (in units
/// of m² patches, the rotary angles with them), attends inside each window except at fullatt_block_indexes,
/// and puts the merger output back in merged-grid order (argsort of the window order). Memory stays bounded:
/// windows of equal length run as one batch, and model/blocks.h attention() computes the queries in chunks
/// whose fp32 score block stays within kAttentionScoreBudgetBytes (64 MiB), so a full-attention block over
/// N_p patches never holds an [H, N_p, N_p] score tensor at once.
struct Qwen2VisionTransformerImpl : torch::nn::Module {
  explicit Qwen2VisionTransformerImpl(const Qwen2VisionConfig& cfg);
  /// @param pixel_values [N_p, C·T·P·P] (qwen_preprocess; any float dtype, any device: moved to the weights'
  /// device and dtype), N_p = grid_t·grid_h·grid_w, rows in merge-blocked order.
  /// @param grid_t,grid_h,grid_w the patch grid (grid_h, grid_w multiples of m).
  /// @return image embeddings [N_v, D] in merged-grid row-major order (N_v = N_p / m², D = out_hidden_size),
  /// in the weights' dtype (the compute dtype: fp32 or bf16) and device.
  /// @param signal when given, also the image's VisionZip-like signal (vision_received.h) from the LAST
  /// block, per merged token in the same merged-grid order as the result: received [N_v] fp32 = the mean over
  /// the token's m² patches of the attention each patch receives (head mean, mean over the queries that see
  /// it: the whole frame in a full-attention block — every Qwen2-VL block and the last block of the published
  /// Qwen2.5-VL configs — or the patch's own window when the last block is windowed); keys [N_v, E] = the
  /// mean of the m² patches' keys of that block (heads concatenated, after the k projection, before the
  /// rotary), in the weights' dtype. Costs one more pass over the last block's scores, in bounded query
  /// chunks (received_attention); nothing without it.
  /// @throws c10::Error (TORCH_CHECK) naming the expected shape when pixel_values does not fit the grid;
  /// InvalidArgument for a grid that is not a multiple of m.
  at::Tensor forward(const at::Tensor& pixel_values, int64_t grid_t, int64_t grid_h, int64_t grid_w,
                     QwenAttentionSignal* signal = nullptr);

  torch::nn::Conv3d proj{nullptr};  // patch_embed.proj: weight [E, C, T, P, P], no bias
  torch::nn::ModuleList blocks{nullptr};
  QwenPatchMerger merger{nullptr};
  Qwen2VisionConfig cfg;
};
TORCH_MODULE(Qwen2VisionTransformer);

/// Checkpoint keys of a tower parameter named as Qwen2VisionTransformer registers it (e.g.
/// "blocks.0.attn.qkv.weight"): "visual." + name (Qwen's published layout), then "model.visual." + name
/// (transformers ≥ 4.52). A CheckpointKeys for load_weights (model/weights.h) on the tower alone.
std::vector<std::string> qwen_visual_checkpoint_keys(const std::string& name);

}  // namespace vispco
