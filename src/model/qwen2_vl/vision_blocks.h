// The blocks of the Qwen2-VL / Qwen2.5-VL vision transformer (transformers v4.55 modeling_qwen2_vl.py
// Qwen2VLVisionBlock / VisionAttention / VisionMlp, modeling_qwen2_5_vl.py Qwen2_5_VLVisionBlock /
// Qwen2_5_VLMLP): pre-norm blocks over one image's patch sequence [N_p, E] (no batch axis: the image's
// patches are the sequence), attention inside segments (the whole image, or Qwen2.5-VL's windows) with the
// 2-D rotary embedding. Parameter names are the checkpoint keys under "visual.blocks.N.".
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <vector>

#include "model/qwen2_vl/vision_config.h"
#include "model/qwen2_vl/vision_received.h"

namespace vispco {

/// The ViT's rotary tables for one image's patch sequence (in the order the blocks see it).
struct QwenVisionRotary {
  at::Tensor cos;  ///< [N_p, D_h] fp32: cos(cat(angles, angles))
  at::Tensor sin;  ///< [N_p, D_h] fp32
};

/// Softmax attention inside consecutive segments of the sequence (cu_seqlens in transformers): a query of
/// segment s sees the keys of segment s only. Segments of equal length go through attention() (model/
/// blocks.h: fp32 softmax, queries chunked to a bounded score block) as one batch of [n_seg, H, L, D_h]
/// gathered from the sequence, so the scores never span two segments and no [N, N] mask is built.
/// @param q,k,v [N, H, D_h], compute dtype @param lengths segment lengths in sequence order, summing to N
/// @return [N, H·D_h], dtype of q. @throws c10::Error when the lengths do not sum to N.
at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::vector<int64_t>& lengths);

/// The tower's norm: LayerNorm with weight and bias [E] (Qwen2-VL) or RMSNorm with weight [E] (Qwen2.5-VL,
/// model/blocks.h rms_norm: normalised in fp32), eps from the config.
struct QwenVisionNormImpl : torch::nn::Module {
  QwenVisionNormImpl(int64_t dim, double eps, bool rms);
  /// @param x [..., E] @return [..., E], dtype of x.
  at::Tensor forward(const at::Tensor& x);
  torch::Tensor weight, bias;  // bias undefined for RMSNorm
  double eps;
  bool rms;
};
TORCH_MODULE(QwenVisionNorm);

/// Multi-head self-attention with a fused qkv projection [3E, E] (+ bias [3E]) and an output projection
/// proj [E, E] (+ bias), rotary on q and k in fp32 (apply_rotary_pos_emb_vision).
struct QwenVisionAttentionImpl : torch::nn::Module {
  explicit QwenVisionAttentionImpl(const Qwen2VisionConfig& cfg);
  /// @param x [N_p, E] normed hidden states @param rot tables for the N_p patches @param segments lengths of
  /// the attention segments (segment_attention) @param signal when given, also this block's per-patch
  /// VisionZip signal (vision_received.h): received [N_p] fp32 (received_attention over the same segments,
  /// from the rotated q, k) and keys [N_p, E] (before the rotary); nothing extra is computed without it.
  /// @return [N_p, E].
  at::Tensor forward(const at::Tensor& x, const QwenVisionRotary& rot, const std::vector<int64_t>& segments,
                     QwenAttentionSignal* signal = nullptr);
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  int64_t n_heads;
};
TORCH_MODULE(QwenVisionAttention);

/// The block MLP: Qwen2-VL fc1 [I, E] → hidden_act → fc2 [E, I]; Qwen2.5-VL down_proj(act(gate_proj(x)) ⊙
/// up_proj(x)) with gate/up [I, E], down [E, I]. Every linear has a bias.
struct QwenVisionMlpImpl : torch::nn::Module {
  explicit QwenVisionMlpImpl(const Qwen2VisionConfig& cfg);
  /// @param x [..., E] @return [..., E].
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};                                // Qwen2-VL
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};  // Qwen2.5-VL
  std::string act;
  bool swiglu;
};
TORCH_MODULE(QwenVisionMlp);

/// One pre-norm block: x + attn(norm1(x)), then + mlp(norm2(·)).
struct QwenVisionBlockImpl : torch::nn::Module {
  explicit QwenVisionBlockImpl(const Qwen2VisionConfig& cfg);
  /// @param x [N_p, E] @param rot, segments, signal as QwenVisionAttentionImpl::forward @return [N_p, E].
  at::Tensor forward(const at::Tensor& x, const QwenVisionRotary& rot, const std::vector<int64_t>& segments,
                     QwenAttentionSignal* signal = nullptr);
  QwenVisionNorm norm1{nullptr}, norm2{nullptr};
  QwenVisionAttention attn{nullptr};
  QwenVisionMlp mlp{nullptr};
};
TORCH_MODULE(QwenVisionBlock);

}  // namespace vispco
