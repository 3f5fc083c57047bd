// CLIP ViT vision tower (transformers modeling_clip.py CLIPVisionTransformer): patch conv (no bias), class
// embedding, learned positions, pre_layrnorm, L × [LayerNorm → MHA → residual → LayerNorm → MLP → residual],
// post_layernorm (unused by LLaVA's penultimate-layer features). Parameter names are the checkpoint keys
// under "vision_tower." (vision_model.embeddings.patch_embedding.weight, ...).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "model/llava/config.h"

namespace vispco {

/// CLIP multi-head self-attention (biased q/k/v/out projections, D_v → D_v).
struct ClipAttentionImpl : torch::nn::Module {
  explicit ClipAttentionImpl(const VisionConfig& cfg);
  /// @param x [B, N, D_v] @param cls_probs if non-null, receives the [CLS] query's attention [B, H, N] fp32.
  /// @param keys if non-null, receives the keys [B, N, D_v] (VisionZip's merge similarity uses them).
  at::Tensor forward(const at::Tensor& x, at::Tensor* cls_probs = nullptr, at::Tensor* keys = nullptr);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};
  int64_t n_heads;
};
TORCH_MODULE(ClipAttention);

/// One CLIP encoder layer (pre-norm).
struct ClipEncoderLayerImpl : torch::nn::Module {
  explicit ClipEncoderLayerImpl(const VisionConfig& cfg);
  at::Tensor forward(const at::Tensor& x, at::Tensor* cls_probs = nullptr, at::Tensor* keys = nullptr);
  ClipAttention self_attn{nullptr};
  torch::nn::LayerNorm layer_norm1{nullptr}, layer_norm2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};  // registered as mlp.fc1 / mlp.fc2
  std::string act;
};
TORCH_MODULE(ClipEncoderLayer);

/// What the tower gives the pipeline for one batch of images.
struct VisionOutput {
  at::Tensor features;       ///< [B, N_v, D_v] hidden states of the feature layer, [CLS] dropped per strategy
  at::Tensor cls_attention;  ///< [B, H_v, N_v] fp32: the [CLS] query's attention over the N_v patch tokens at
                             ///< the feature layer (VisionZip's dominant-token score); defined when asked for
  at::Tensor keys;  ///< [B, N_v, D_v] the feature layer's attention keys of the patch tokens; when asked
};

/// The "vision_model" of CLIPVisionModel.
struct ClipVisionModelImpl : torch::nn::Module {
  explicit ClipVisionModelImpl(const VisionConfig& cfg);
  torch::Tensor class_embedding;  // [D_v], registered as embeddings.class_embedding
  torch::nn::Conv2d patch_embedding{nullptr};
  torch::nn::Embedding position_embedding{nullptr};
  torch::nn::LayerNorm pre_layrnorm{nullptr}, post_layernorm{nullptr};
  torch::nn::ModuleList layers{nullptr};  // encoder.layers
  VisionConfig cfg;
};
TORCH_MODULE(ClipVisionModel);

/// CLIPVisionModel wrapper ("vision_tower" in LLaVA).
struct ClipVisionTowerImpl : torch::nn::Module {
  explicit ClipVisionTowerImpl(const VisionConfig& cfg);
  /// Runs the first `n_layers` encoder layers (LLaVA's vision_feature_layer) and returns their output.
  /// @param pixels [B, 3, S, S] compute dtype, CLIP-normalised @param drop_cls drop the [CLS] row ("default")
  /// @param want_cls_attention also return the [CLS] attention and keys of the last layer run (requires ≥ 1
  /// layer).
  VisionOutput forward(const at::Tensor& pixels, int64_t n_layers, bool drop_cls,
                       bool want_cls_attention = false);
  ClipVisionModel vision_model{nullptr};
};
TORCH_MODULE(ClipVisionTower);

}  // namespace vispco
