// The sequence state that flows through the decoder, and the hook through which a pruning plan acts on it
// inside the forward pass (DESIGN.md §3: pruning is an argument of the forward, not a patch on it).
#pragma once
#include <ATen/core/Tensor.h>

#include "model/shape.h"

namespace vispco {

/// Tokens alive at some point of the decoder forward. Rows of a batch always hold the same T (left padding).
struct TokenState {
  at::Tensor hidden;  ///< [B, T, D] hidden states, compute dtype
  /// Original RoPE positions, int64, kept unchanged through pruning: [B, T] for 1-D RoPE, or [A, B, T] for A
  /// position axes (M-RoPE, Qwen2-VL §2.1: A = 3, temporal, height, width; text tokens hold one position
  /// on every axis). position_axes() tells which.
  at::Tensor positions;
  at::Tensor valid;       ///< [B, T] bool, false for left padding
  at::Tensor visual;      ///< [B, T] bool, true for visual tokens
  at::Tensor grid_index;  ///< [B, T] int64: for a visual token its index in the image's N_v patch grid (a
                          ///< merged token carries its representative's index); −1 for text and padding
};

/// What the decoder hands a hook before layer ℓ ≥ 1, measured in layer ℓ−1 (each field only when asked).
struct LayerSignals {
  /// [B, H, R, T] fp32 attention probabilities of the R query rows asked by attention_rows(ℓ−1) over the T
  /// keys of layer ℓ−1 (in prefill exactly the current tokens); undefined when none were asked.
  at::Tensor attn_rows;
  /// [B, H_kv, T, D_h] layer ℓ−1's keys of the current tokens, after RoPE, compute dtype (a view of the KV
  /// cache); undefined unless wants_keys(ℓ−1).
  at::Tensor keys;
};

/// What a pruning plan does inside the decoder's prefill. Stage layer ℓ acts just before decoder layer ℓ
/// (ℓ = 0: right after the projector; ℓ ≥ 1: on the output of layer ℓ−1).
class PrefillHook {
 public:
  virtual ~PrefillHook() = default;
  /// True when the hook needs the vision tower's [CLS] attention and keys (VisionZip); generate() then asks
  /// the tower for them and calls begin() with them.
  virtual bool wants_vision_attention() const { return false; }
  /// Called once per prefill, before the decoder runs. A batch whose images have different layouts is
  /// prefilled in groups of one layout, one begin() each. @param cls_attention [B, N_v] fp32 head-averaged
  /// [CLS] attention at the feature layer, or undefined @param vision_keys [B, N_v, D_v] feature-layer keys,
  /// or undefined @param layout the images' layout (N_v and grid; model/shape.h).
  virtual void begin(const at::Tensor& cls_attention, const at::Tensor& vision_keys,
                     const VisualLayout& layout) {}
  /// True when the hook needs a gradient saliency of the visual tokens (model/saliency.h); generate() then
  /// runs that forward + backward pre-pass before the prefill and hands the result to set_visual_saliency().
  virtual bool wants_visual_saliency() const { return false; }
  /// @param saliency [B, N_v] fp32, indexed by patch (grid index), one row per request.
  virtual void set_visual_saliency(const at::Tensor& saliency) {}
  /// True when the hook may prune before decoder layer `layer` (0 ≤ layer < L).
  virtual bool acts_before(int64_t layer) const = 0;
  /// Called before every decoder layer with the tokens entering it (before layer 0: the LLM's input, after
  /// any ℓ = 0 pruning). Returns query rows [B, R] (int64 indices into T) whose attention probabilities the
  /// hook needs from decoder layer `layer`; undefined when none. Only these rows are materialised.
  virtual at::Tensor attention_rows(int64_t layer, const TokenState& state) { return {}; }
  /// True when the hook needs decoder layer `layer`'s keys (LayerSignals::keys) before layer `layer` + 1.
  virtual bool wants_keys(int64_t layer) const { return false; }
  /// Called before decoder layer `layer` with the current state and, for layer ≥ 1, what layer−1 measured
  /// as asked (in prefill layer−1 saw exactly these tokens). The hook may replace `state` by a shorter one
  /// (survivors via gather_tokens, optionally merged tokens); it returns true when it did. Text tokens and
  /// padding must survive unchanged and in order; all rows keep the same T'.
  virtual bool apply(int64_t layer, TokenState& state, const LayerSignals& signals) = 0;
};

/// Training-mode soft pruning (VisPCO, Ji et al. ACL 2026 §3.2; the learned gate's training): instead of
/// removing tokens, the hook gives
/// every token a gate in [0, 1] that multiplies its weight as an attention *key* (attention_gated()), so the
/// decision can carry a gradient (straight-through estimators). Tokens keep flowing as queries; with a hard
/// 0/1 gate the kept tokens compute exactly what physical removal computes. Used by
/// LlamaForCausalLM::forward_gated(), which runs the same layer loop as the inference path (PrefillHook,
/// which removes tokens instead).
class KeyGateHook {
 public:
  virtual ~KeyGateHook() = default;
  /// Query rows [B, R] (int64 indices into T) whose (gated) attention probabilities the hook needs from
  /// decoder layer `layer`; undefined when none.
  virtual at::Tensor attention_rows(int64_t layer, const TokenState& state) const { return {}; }
  /// Called before decoder layer `layer` with the current state (hidden = input of that layer) and, if asked
  /// for at layer−1, its attention rows [B, H, R, T] fp32. @return the key gate [B, T] (floating, in [0, 1],
  /// may require grad) applying from this layer on, or undefined to keep the previous gate (none at first).
  /// The hook composes gates across layers itself (a token gated off stays off).
  virtual at::Tensor gate(int64_t layer, const TokenState& state, const at::Tensor& attn_rows) = 0;
  /// Whether a query's own key is gated too (attention_gated()): false = VisPCO's release (a gated-off
  /// query still attends to itself); true = a log-gate bias on every logit of the key (the learned gate).
  virtual bool gates_own_key() const { return false; }
};

/// Keeps tokens `keep` [B, T'] (int64 indices into T) of every [B, T, …] field of `state` (and of every axis
/// of multi-axis positions).
TokenState gather_tokens(const TokenState& state, const at::Tensor& keep);

/// Number of position axes of `positions`: 1 for [B, T], A for [A, B, T].
int64_t position_axes(const at::Tensor& positions);

/// The batch dimension of `positions` (0 for [B, T], 1 for [A, B, T]): where rows are selected or joined.
int64_t position_batch_dim(const at::Tensor& positions);

/// Positions of the token that follows each row's prompt, [B, 1] or [A, B, 1]: one past the row's largest
/// position on any axis, on every axis (Qwen2-VL's rule; for 1-D RoPE the last position + 1).
/// @param positions [B, T] or [A, B, T] of the prompt's tokens (padding at position 0).
at::Tensor next_positions(const at::Tensor& positions);

}  // namespace vispco
