// Qwen2-VL / Qwen2.5-VL ViT blocks; see vision_blocks.h.
#include "model/qwen2_vl/vision_blocks.h"

#include <ATen/ATen.h>

#include <map>

#include "model/blocks.h"
#include "model/quant.h"

namespace vispco {

at::Tensor segment_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::vector<int64_t>& lengths) {
  const int64_t N = q.size(0), H = q.size(1), Dh = q.size(2);
  int64_t total = 0;
  std::map<int64_t, std::vector<int64_t>> starts;  // segment length → start of each segment of that length
  for (const auto n : lengths) {
    TORCH_CHECK(n > 0, "segment_attention: empty segment");
    starts[n].push_back(total);
    total += n;
  }
  TORCH_CHECK(total == N, "segment_attention: segments sum to ", total, " but the sequence has ", N,
              " tokens");
  // [n, L, H, Dh] → [n, H, L, Dh]
  auto heads_first = [](const at::Tensor& t) { return t.permute({0, 2, 1, 3}); };
  if (starts.size() == 1 && starts.begin()->second.size() == 1)  // one segment: no gather
    return attention(heads_first(q.unsqueeze(0)), heads_first(k.unsqueeze(0)), heads_first(v.unsqueeze(0)),
                     {})
        .reshape({N, H * Dh});
  auto out = at::empty({N, H * Dh}, q.options());
  auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  for (const auto& [len, first] : starts) {
    const int64_t n = static_cast<int64_t>(first.size());
    auto idx =
        (at::tensor(first, at::kLong).to(q.device()).unsqueeze(1) + at::arange(len, long_opts)).view(-1);
    auto gather = [&](const at::Tensor& t) {
      return heads_first(t.index_select(0, idx).view({n, len, H, Dh}));
    };
    auto o = attention(gather(q), gather(k), gather(v), {});  // [n, L, H·Dh]
    out.index_copy_(0, idx, o.reshape({n * len, H * Dh}));
  }
  return out;
}

QwenVisionNormImpl::QwenVisionNormImpl(int64_t dim, double e, bool r) : eps(e), rms(r) {
  weight = register_parameter("weight", torch::ones({dim}));
  if (!rms) bias = register_parameter("bias", torch::zeros({dim}));
}

at::Tensor QwenVisionNormImpl::forward(const at::Tensor& x) {
  if (rms) return rms_norm(x, weight, eps);
  return at::layer_norm(x, {weight.size(0)}, weight, bias, eps);
}

QwenVisionAttentionImpl::QwenVisionAttentionImpl(const Qwen2VisionConfig& cfg) : n_heads(cfg.num_heads) {
  const int64_t e = cfg.embed_dim;
  qkv = register_module("qkv", torch::nn::Linear(e, 3 * e));
  proj = register_module("proj", torch::nn::Linear(e, e));
}

at::Tensor QwenVisionAttentionImpl::forward(const at::Tensor& x, const QwenVisionRotary& rot,
                                            const std::vector<int64_t>& segments,
                                            QwenAttentionSignal* signal) {
  const int64_t N = x.size(0), E = x.size(1), Dh = E / n_heads;
  auto qkv_out = linear_forward(qkv, x).view({N, 3, n_heads, Dh});
  // apply_rotary_pos_emb_vision: q and k rotated in fp32, then back to the compute dtype.
  auto rotate = [&](const at::Tensor& t) {
    auto f = t.to(at::kFloat);
    auto half = Dh / 2;
    auto rotated = at::cat({-f.narrow(-1, half, half), f.narrow(-1, 0, half)}, -1);
    return (f * rot.cos.unsqueeze(1) + rotated * rot.sin.unsqueeze(1)).to(x.scalar_type());
  };
  auto q = rotate(qkv_out.select(1, 0)), k = rotate(qkv_out.select(1, 1));
  auto v = qkv_out.select(1, 2);
  if (signal != nullptr) {
    signal->received = received_attention(q, k, segments);
    signal->keys = qkv_out.select(1, 1).reshape({N, E});
  }
  return linear_forward(proj, segment_attention(q, k, v, segments));
}

QwenVisionMlpImpl::QwenVisionMlpImpl(const Qwen2VisionConfig& cfg)
    : act(cfg.hidden_act), swiglu(cfg.windowed_rms_swiglu()) {
  const int64_t e = cfg.embed_dim, i = cfg.intermediate_size;
  if (swiglu) {
    gate_proj = register_module("gate_proj", torch::nn::Linear(e, i));
    up_proj = register_module("up_proj", torch::nn::Linear(e, i));
    down_proj = register_module("down_proj", torch::nn::Linear(i, e));
  } else {
    fc1 = register_module("fc1", torch::nn::Linear(e, i));
    fc2 = register_module("fc2", torch::nn::Linear(i, e));
  }
}

at::Tensor QwenVisionMlpImpl::forward(const at::Tensor& x) {
  if (swiglu)
    return linear_forward(down_proj,
                          activation(linear_forward(gate_proj, x), act) * linear_forward(up_proj, x));
  return linear_forward(fc2, activation(linear_forward(fc1, x), act));
}

QwenVisionBlockImpl::QwenVisionBlockImpl(const Qwen2VisionConfig& cfg) {
  const bool rms = cfg.windowed_rms_swiglu();
  norm1 = register_module("norm1", QwenVisionNorm(cfg.embed_dim, cfg.eps, rms));
  norm2 = register_module("norm2", QwenVisionNorm(cfg.embed_dim, cfg.eps, rms));
  attn = register_module("attn", QwenVisionAttention(cfg));
  mlp = register_module("mlp", QwenVisionMlp(cfg));
}

at::Tensor QwenVisionBlockImpl::forward(const at::Tensor& x, const QwenVisionRotary& rot,
                                        const std::vector<int64_t>& segments, QwenAttentionSignal* signal) {
  auto h = x + attn->forward(norm1(x), rot, segments, signal);
  return h + mlp->forward(norm2(h));
}

}  // namespace vispco
