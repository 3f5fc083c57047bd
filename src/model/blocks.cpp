// Shared transformer blocks: RMSNorm, RoPE, masks, grouped-query attention, activations.
#include "model/blocks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/errors.h"
#include "model/attention_chunks.h"

namespace vispco {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.to(at::kFloat);
  auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor activation(const at::Tensor& x, const std::string& name) {
  if (name == "silu") return at::silu(x);
  if (name == "gelu") return at::gelu(x);
  if (name == "gelu_pytorch_tanh") return at::gelu(x, "tanh");
  if (name == "quick_gelu") return x * at::sigmoid(1.702 * x);
  throw InvalidArgument("unknown activation '" + name +
                        "' (valid: silu, gelu, gelu_pytorch_tanh, quick_gelu)");
}

Rotary rotary_tables(const at::Tensor& positions, int64_t d_head, double theta, c10::ScalarType dtype,
                     const std::vector<int64_t>& mrope_section) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(positions.device());
  auto exponent = at::arange(0, d_head, 2, opts) / static_cast<double>(d_head);
  auto inv_freq = at::pow(theta, exponent).reciprocal();            // [D_h/2]
  auto angles = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;  // [B, T, D_h/2] or [A, B, T, D_h/2]
  if (positions.dim() == 3 || !mrope_section.empty()) {
    int64_t total = 0;
    for (auto s : mrope_section) total += s;
    const int64_t axes = positions.dim() == 3 ? positions.size(0) : 1;
    if (positions.dim() != 3 || static_cast<int64_t>(mrope_section.size()) != axes || total != d_head / 2)
      throw InvalidArgument("M-RoPE: " + std::to_string(axes) + " position axes and " +
                            std::to_string(mrope_section.size()) + " sections summing to " +
                            std::to_string(total) +
                            " (need [A, B, T] positions, one section per axis, summing to D_h/2 = " +
                            std::to_string(d_head / 2) + ")");
    std::vector<at::Tensor> parts;  // section a of the frequencies from axis a
    int64_t start = 0;
    for (size_t a = 0; a < mrope_section.size(); ++a) {
      parts.push_back(angles[static_cast<int64_t>(a)].narrow(-1, start, mrope_section[a]));
      start += mrope_section[a];
    }
    angles = at::cat(parts, -1);  // [B, T, D_h/2]
  }
  auto emb = at::cat({angles, angles}, -1).unsqueeze(1);  // [B, 1, T, D_h]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const Rotary& rot) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = at::cat({-x2, x1}, -1);
  return x * rot.cos + rotated * rot.sin;
}

at::Tensor causal_mask(const at::Tensor& key_valid, int64_t n_query, int64_t past) {
  const int64_t n_key = key_valid.size(1);
  auto opts = at::TensorOptions().dtype(at::kLong).device(key_valid.device());
  auto q_idx = at::arange(n_query, opts).unsqueeze(1) + past;             // [T, 1]
  auto k_idx = at::arange(n_key, opts).unsqueeze(0);                      // [1, S]
  auto visible = (k_idx <= q_idx).unsqueeze(0) & key_valid.unsqueeze(1);  // [B, T, S]
  auto mask = at::zeros(visible.sizes(), key_valid.options().dtype(at::kFloat));
  mask.masked_fill_(visible.logical_not(), std::numeric_limits<float>::lowest());
  return mask.unsqueeze(1);
}

namespace {

// attention() over all T query rows at once: one [B, H_kv, G·T, S] fp32 score block.
at::Tensor attention_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask, const at::Tensor& probs_rows, at::Tensor* probs_out) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), G = H / Hkv;
  // [B, H, T, Dh] -> [B, Hkv, G·T, Dh]: the G query heads sharing a kv head are stacked along rows.
  auto qg = q.contiguous().view({B, Hkv, G * T, Dh});
  auto scores = at::matmul(qg, k.transpose(-1, -2)).to(at::kFloat) * (1.0 / std::sqrt(double(Dh)));
  if (mask.defined()) scores = (scores.view({B, Hkv, G, T, S}) + mask.unsqueeze(1)).view({B, Hkv, G * T, S});
  auto probs = at::softmax(scores, -1);
  if (probs_rows.defined() && probs_out != nullptr) {
    // rows [B, R] -> gather [B, H, R, S] from probs viewed as [B, H, T, S].
    auto p = probs.view({B, H, T, S});
    auto idx = probs_rows.view({B, 1, -1, 1}).expand({B, H, probs_rows.size(1), S});
    *probs_out = p.gather(2, idx);
  }
  auto out = at::matmul(probs.to(v.scalar_type()), v);  // [B, Hkv, G·T, Dh]
  return out.view({B, H, T, Dh}).transpose(1, 2).reshape({B, T, H * Dh});
}

}  // namespace

int64_t attention_query_chunk(int64_t batch, int64_t heads, int64_t n_keys, int64_t budget_bytes) {
  const int64_t row_bytes = std::max<int64_t>(1, batch * heads * n_keys * int64_t(sizeof(float)));
  return std::max<int64_t>(1, budget_bytes / row_bytes);
}

int64_t causal_query_chunk(int64_t batch, int64_t heads, int64_t n_queries, int64_t n_keys,
                           int64_t budget_bytes) {
  const int64_t by_budget = attention_query_chunk(batch, heads, n_keys, budget_bytes);
  // Below kCausalChunkRows·2 rows the diagonal block is most of the work: one chunk.
  if (n_queries <= 2 * kCausalChunkRows) return std::min(by_budget, n_queries);
  return std::min(by_budget, kCausalChunkRows);
}

at::Tensor attention_in_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& mask, const at::Tensor& probs_rows, at::Tensor* probs_out,
                               int64_t budget_bytes, int64_t causal_past) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), S = k.size(2);
  TORCH_CHECK(H % k.size(1) == 0, "attention: ", H, " query heads are not a multiple of ", k.size(1),
              " kv heads");
  const bool causal = causal_past >= 0;
  TORCH_CHECK(!causal || causal_past + T <= S, "attention: ", T, " queries after ", causal_past,
              " cached keys need ", causal_past + T, " keys, got ", S);
  TORCH_CHECK(!causal || mask.defined(), "attention: causal key skipping needs the causal mask it mirrors");
  const int64_t chunk =
      causal ? causal_query_chunk(B, H, T, S, budget_bytes) : attention_query_chunk(B, H, S, budget_bytes);
  // Keys a chunk of queries [t0, t0 + c) can see: all S, or the first causal_past + t0 + c when causal.
  const auto visible = [&](int64_t t0, int64_t c) { return causal ? causal_past + t0 + c : S; };
  if (chunk >= T && visible(0, T) == S) return attention_block(q, k, v, mask, probs_rows, probs_out);
  const bool want_rows = probs_rows.defined() && probs_out != nullptr;
  std::vector<at::Tensor> outs;
  at::Tensor rows_out;  // [B, H, R, S]: each asked row from the chunk that holds it
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t c = std::min(chunk, T - t0), s = visible(t0, c);
    at::Tensor local, got;
    if (want_rows) local = (probs_rows - t0).clamp(0, c - 1);
    const auto m = mask.defined() ? mask.narrow(2, t0, c).narrow(3, 0, s) : mask;
    outs.push_back(attention_block(q.narrow(2, t0, c), k.narrow(2, 0, s), v.narrow(2, 0, s), m, local,
                                   want_rows ? &got : nullptr));
    if (want_rows) {
      if (s < S) got = at::constant_pad_nd(got, {0, S - s});  // the skipped keys' probabilities are 0
      const auto inside = ((probs_rows >= t0) & (probs_rows < t0 + c)).view({B, 1, -1, 1});  // [B, 1, R, 1]
      rows_out = at::where(inside, got, rows_out.defined() ? rows_out : at::zeros_like(got));
    }
  }
  if (want_rows) *probs_out = rows_out;
  return outs.size() == 1 ? outs[0] : at::cat(outs, 1);
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     const at::Tensor& probs_rows, at::Tensor* probs_out, int64_t causal_past) {
  return attention_in_chunks(q, k, v, mask, probs_rows, probs_out, kAttentionScoreBudgetBytes, causal_past);
}

at::Tensor attention_gated(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask, const at::Tensor& key_gate, int64_t past,
                           const at::Tensor& probs_rows, at::Tensor* probs_out, bool gate_own_key) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), G = H / Hkv;
  TORCH_CHECK(H % Hkv == 0, "attention_gated: ", H, " query heads are not a multiple of ", Hkv, " kv heads");
  TORCH_CHECK(key_gate.dim() == 2 && key_gate.size(0) == B && key_gate.size(1) == S,
              "attention_gated: key_gate must be [B, S] = [", B, ", ", S, "], got ", key_gate.sizes());
  auto qg = q.contiguous().view({B, Hkv, G * T, Dh});
  auto scores = at::matmul(qg, k.transpose(-1, -2)).to(at::kFloat) * (1.0 / std::sqrt(double(Dh)));
  auto s5 = scores.view({B, Hkv, G, T, S});
  at::Tensor probs;
  if (gate_own_key) {
    // softmax(logits + (mask + log g)): the bias is built at [B, 1, 1, T, S] and the softmax is fused (a gate
    // below 1e−30 counts as 1e−30, so log's gradient stays finite).
    auto bias = at::log(key_gate.to(at::kFloat).clamp_min(1e-30)).view({B, 1, 1, 1, S});
    if (mask.defined()) bias = mask.unsqueeze(1) + bias;
    probs = at::softmax(s5 + bias, -1).view({B, Hkv, G * T, S});
  } else {
    if (mask.defined()) s5 = s5 + mask.unsqueeze(1);
    // The row max is a constant shift (detached): exp never overflows, and the gate decides the normaliser.
    auto e = at::exp(s5 - std::get<0>(s5.max(-1, /*keepdim=*/true)).detach());
    auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
    auto self_key = (at::arange(S, opts).unsqueeze(0) == at::arange(T, opts).unsqueeze(1) + past)
                        .to(at::kFloat);            // [T, S]
    auto g = key_gate.to(at::kFloat).unsqueeze(1);  // [B, 1, S]
    auto eff = g + (1 - g) * self_key;              // [B, T, S]
    auto w = e * eff.view({B, 1, 1, T, S});
    probs = (w / w.sum(-1, /*keepdim=*/true).clamp_min(1e-30)).view({B, Hkv, G * T, S});
  }
  if (probs_rows.defined() && probs_out != nullptr) {
    auto p = probs.view({B, H, T, S});
    auto idx = probs_rows.view({B, 1, -1, 1}).expand({B, H, probs_rows.size(1), S});
    *probs_out = p.gather(2, idx);
  }
  auto out = at::matmul(probs.to(v.scalar_type()), v);  // [B, Hkv, G·T, Dh]
  return out.view({B, H, T, Dh}).transpose(1, 2).reshape({B, T, H * Dh});
}

}  // namespace vispco
