// Shared transformer blocks written once for every model family: RMSNorm, rotary position embedding,
// scaled-dot-product attention with grouped-query heads, additive masks, and activations.
// Shapes: B batch, T query tokens, S key tokens, H query heads, H_kv key/value heads, D_h head dim.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace vispco {

/// RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm): x · rsqrt(mean(x², −1) + eps) · weight, the
/// normalisation computed in fp32 and cast back to x's dtype before the weight multiply (as HF).
/// @param x [..., D] @param weight [D] @return [..., D], dtype of x.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// Activation by its transformers name: "silu", "gelu" (exact erf), "gelu_pytorch_tanh", "quick_gelu"
/// (x·σ(1.702x), CLIP). @throws InvalidArgument for another name.
at::Tensor activation(const at::Tensor& x, const std::string& name);

/// Rotary embedding tables for given positions (Su et al. 2021, RoFormer; HF Llama's rotate_half layout:
/// the two halves of the head dim form the pairs).
struct Rotary {
  at::Tensor cos;  ///< [B, 1, T, D_h], compute dtype
  at::Tensor sin;  ///< [B, 1, T, D_h], compute dtype
};
/// cos/sin of positions · θ^(−2i/D_h), angles computed in fp32. @param positions [B, T] int64, or [A, B, T]
/// for multi-axis RoPE (M-RoPE, Qwen2-VL §2.1; transformers' apply_multimodal_rotary_pos_emb): frequency i of
/// the D_h/2 takes its angle from axis a when i lies in the a-th section of `mrope_section` (sizes summing to
/// D_h/2), the same in both halves. @param mrope_section empty for [B, T] positions.
/// @throws InvalidArgument when the sections do not match the positions' axes or sum to D_h/2.
Rotary rotary_tables(const at::Tensor& positions, int64_t d_head, double theta, c10::ScalarType dtype,
                     const std::vector<int64_t>& mrope_section = {});
/// x·cos + rotate_half(x)·sin with rotate_half(x) = cat(−x₂, x₁). @param x [B, H, T, D_h].
at::Tensor apply_rotary(const at::Tensor& x, const Rotary& rot);

/// Additive attention mask [B, 1, T, S] in fp32: 0 where query t may attend key s, the lowest finite float
/// elsewhere (as HF: a padding query that sees no key then gets finite uniform weights instead of NaN, which
/// would reach valid rows through 0·NaN in the value product of the next layer).
/// Key s is visible to query t when key_valid[b, s] and s ≤ past + t (causal by cache index: tokens keep
/// their order through pruning, so cache order is sequence order).
/// @param key_valid [B, S] bool (false for left padding) @param past number of cached keys before the T new
/// ones.
at::Tensor causal_mask(const at::Tensor& key_valid, int64_t n_query, int64_t past);

/// Multi-head attention core: softmax(q·kᵀ/√D_h + mask)·v with grouped-query heads (query head h uses
/// key/value head h / (H / H_kv), as HF repeat_kv) without materialising repeated keys. Softmax in fp32.
/// @param q [B, H, T, D_h] @param k,v [B, H_kv, S, D_h] @param mask [B, 1, T, S] additive fp32 or undefined.
/// @param probs_rows when defined, [B, R] int64 query indices whose attention probabilities are returned
///        in *probs_out as [B, H, R, S] fp32 (FastV-style scorers read these rows only).
/// @param causal_past ≥ 0 when `mask` is causal_mask(…, T, causal_past) (or hides more): keys no query of a
///        chunk can see are skipped instead of masked (model/attention_chunks.h); −1 computes every key.
/// @return [B, T, H·D_h] (heads merged), dtype of q.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     const at::Tensor& probs_rows = {}, at::Tensor* probs_out = nullptr,
                     int64_t causal_past = -1);

/// attention() with a multiplicative key gate, for training-mode soft pruning (VisPCO, Ji et al. ACL 2026 §3:
/// pruned tokens are masked as keys instead of removed, so a gradient reaches the gate):
///   p[t, s] = e[t, s]·g̃[t, s] / Σ_s' e[t, s']·g̃[t, s'],  e = exp(q·kᵀ/√D_h + mask − rowmax),
///   g̃[t, s] = gate[s] for s ≠ past + t and 1 on the query's own key (a gated-off query still attends to
///   itself, so its row stays defined; as VisPCO's release), or gate[s] everywhere when `gate_own_key`
///   (= softmax(logits + mask + log gate): a log-gate bias on every query's logit of the key, the learned
///   gate's training, prune/gate.h).
/// With a hard 0/1 gate the rows of kept queries equal attention() over the kept keys only, i.e. physical
/// removal; differentiable in gate (and in q, k, v). The plain attention() fast path is untouched.
/// @param q [B, H, T, D_h] @param k,v [B, H_kv, S, D_h] @param mask [B, 1, T, S] additive fp32 or undefined.
/// @param key_gate [B, S] floating, values in [0, 1] (any float dtype; used in fp32).
/// @param past keys cached before the T queries (query t is key past + t).
/// @param probs_rows/probs_out as attention(); the returned probabilities are the gated ones.
/// @param gate_own_key whether a query's own key is gated too (see g̃ above).
/// @return [B, T, H·D_h], dtype of q. @throws c10::Error when key_gate is not [B, S].
at::Tensor attention_gated(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask, const at::Tensor& key_gate, int64_t past,
                           const at::Tensor& probs_rows = {}, at::Tensor* probs_out = nullptr,
                           bool gate_own_key = false);

}  // namespace vispco
