// CLIP ViT vision tower forward (transformers CLIPVisionTransformer), with optional [CLS]-attention output.
#include "model/llava/clip_vision.h"

#include <ATen/ATen.h>

#include "model/blocks.h"
#include "model/quant.h"

namespace vispco {

namespace {
torch::nn::LayerNorm layer_norm(const VisionConfig& cfg) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.hidden_size}).eps(cfg.layer_norm_eps));
}
}  // namespace

ClipAttentionImpl::ClipAttentionImpl(const VisionConfig& cfg) : n_heads(cfg.num_attention_heads) {
  const int64_t d = cfg.hidden_size;
  q_proj = register_module("q_proj", torch::nn::Linear(d, d));
  k_proj = register_module("k_proj", torch::nn::Linear(d, d));
  v_proj = register_module("v_proj", torch::nn::Linear(d, d));
  out_proj = register_module("out_proj", torch::nn::Linear(d, d));
}

at::Tensor ClipAttentionImpl::forward(const at::Tensor& x, at::Tensor* cls_probs, at::Tensor* keys) {
  const int64_t B = x.size(0), N = x.size(1), D = x.size(2), Dh = D / n_heads;
  auto split = [&](const at::Tensor& t) { return t.view({B, N, n_heads, Dh}).transpose(1, 2); };
  auto k_flat = linear_forward(k_proj, x);
  auto q = split(linear_forward(q_proj, x)), k = split(k_flat), v = split(linear_forward(v_proj, x));
  at::Tensor rows;
  if (cls_probs != nullptr) rows = at::zeros({B, 1}, x.options().dtype(at::kLong));
  at::Tensor probs;
  auto out = attention(q, k, v, at::Tensor(), rows, cls_probs != nullptr ? &probs : nullptr);
  if (cls_probs != nullptr) *cls_probs = probs.squeeze(2);  // [B, H, N]
  if (keys != nullptr) *keys = k_flat;
  return linear_forward(out_proj, out);
}

ClipEncoderLayerImpl::ClipEncoderLayerImpl(const VisionConfig& cfg) : act(cfg.hidden_act) {
  self_attn = register_module("self_attn", ClipAttention(cfg));
  layer_norm1 = register_module("layer_norm1", layer_norm(cfg));
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  fc1 = mlp->register_module("fc1", torch::nn::Linear(cfg.hidden_size, cfg.intermediate_size));
  fc2 = mlp->register_module("fc2", torch::nn::Linear(cfg.intermediate_size, cfg.hidden_size));
  layer_norm2 = register_module("layer_norm2", layer_norm(cfg));
}

at::Tensor ClipEncoderLayerImpl::forward(const at::Tensor& x, at::Tensor* cls_probs, at::Tensor* keys) {
  auto h = x + self_attn->forward(layer_norm1(x), cls_probs, keys);
  return h + linear_forward(fc2, activation(linear_forward(fc1, layer_norm2(h)), act));
}

ClipVisionModelImpl::ClipVisionModelImpl(const VisionConfig& c) : cfg(c) {
  auto emb = register_module("embeddings", std::make_shared<torch::nn::Module>());
  class_embedding = emb->register_parameter("class_embedding", torch::randn({cfg.hidden_size}));
  patch_embedding = emb->register_module(
      "patch_embedding",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(cfg.num_channels, cfg.hidden_size, cfg.patch_size)
                            .stride(cfg.patch_size)
                            .bias(false)));
  const int64_t n_pos = cfg.grid() * cfg.grid() + 1;
  position_embedding =
      emb->register_module("position_embedding", torch::nn::Embedding(n_pos, cfg.hidden_size));
  pre_layrnorm = register_module("pre_layrnorm", layer_norm(cfg));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers = encoder->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) layers->push_back(ClipEncoderLayer(cfg));
  post_layernorm = register_module("post_layernorm", layer_norm(cfg));
}

ClipVisionTowerImpl::ClipVisionTowerImpl(const VisionConfig& cfg) {
  vision_model = register_module("vision_model", ClipVisionModel(cfg));
}

VisionOutput ClipVisionTowerImpl::forward(const at::Tensor& pixels, int64_t n_layers, bool drop_cls,
                                          bool want_cls_attention) {
  auto& m = *vision_model;
  const int64_t B = pixels.size(0);
  TORCH_CHECK(pixels.dim() == 4 && pixels.size(1) == m.cfg.num_channels &&
                  pixels.size(2) == m.cfg.image_size && pixels.size(3) == m.cfg.image_size,
              "vision tower expects pixels [B, 3, ", m.cfg.image_size, ", ", m.cfg.image_size, "], got ",
              pixels.sizes());
  auto patches = m.patch_embedding(pixels).flatten(2).transpose(1, 2);  // [B, N, D_v]
  auto cls = m.class_embedding.view({1, 1, -1}).expand({B, 1, patches.size(2)});
  auto x = at::cat({cls, patches}, 1) + m.position_embedding->weight.unsqueeze(0);
  x = m.pre_layrnorm(x);
  VisionOutput out;
  at::Tensor cls_probs, keys;
  for (int64_t i = 0; i < n_layers; ++i) {
    const bool last = want_cls_attention && i == n_layers - 1;
    x = m.layers[i]->as<ClipEncoderLayerImpl>()->forward(x, last ? &cls_probs : nullptr,
                                                         last ? &keys : nullptr);
  }
  const int64_t first = drop_cls ? 1 : 0;
  out.features = x.narrow(1, first, x.size(1) - first);
  if (want_cls_attention && n_layers > 0) {
    out.cls_attention = cls_probs.narrow(2, 1, cls_probs.size(2) - 1);
    out.keys = keys.narrow(1, 1, keys.size(1) - 1);
  }
  return out;
}

}  // namespace vispco
