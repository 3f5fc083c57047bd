// Llama decoder (transformers modeling_llama.py): token embedding, L × [RMSNorm → GQA self-attention with
// RoPE → residual → RMSNorm → SwiGLU MLP → residual], final RMSNorm, lm_head. Parameter names are the
// checkpoint keys under "language_model." (model.layers.N.self_attn.q_proj.weight, ...).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "model/blocks.h"
#include "model/kv_cache.h"
#include "model/text_config.h"
#include "model/token_state.h"

namespace vispco {

/// Llama self-attention with grouped-query heads and RoPE. Weights: q_proj [H·D_h, D], k_proj/v_proj
/// [H_kv·D_h, D], o_proj [D, H·D_h].
struct LlamaAttentionImpl : torch::nn::Module {
  explicit LlamaAttentionImpl(const TextConfig& cfg);
  /// @param x [B, T, D] normed hidden @param rot RoPE tables for the T positions @param cache this layer's
  /// cache, extended by the T new keys/values @param valid [B, T] key validity of the new tokens
  /// @param mask [B, 1, T, S] additive @param probs_rows/probs_out see attention().
  /// @param key_gate [B, S] multiplicative key gate (attention_gated()), or undefined for plain attention().
  /// @param gate_own_key attention_gated()'s: whether a query's own key is gated too.
  /// @return [B, T, D].
  at::Tensor forward(const at::Tensor& x, const Rotary& rot, LayerKvCache& cache, const at::Tensor& valid,
                     const at::Tensor& mask, const at::Tensor& probs_rows = {},
                     at::Tensor* probs_out = nullptr, const at::Tensor& key_gate = {},
                     bool gate_own_key = false);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  int64_t n_heads, n_kv_heads, d_head;
};
TORCH_MODULE(LlamaAttention);

/// SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)). gate/up [m, D], down [D, m].
struct LlamaMlpImpl : torch::nn::Module {
  explicit LlamaMlpImpl(const TextConfig& cfg);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

/// RMSNorm with its weight [D] registered as "weight" (see rms_norm()).
struct LlamaRmsNormImpl : torch::nn::Module {
  LlamaRmsNormImpl(int64_t dim, double eps);
  /// @param x [..., D] @return [..., D].
  at::Tensor forward(const at::Tensor& x) { return rms_norm(x, weight, eps); }
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(LlamaRmsNorm);

/// One pre-norm decoder layer.
struct LlamaDecoderLayerImpl : torch::nn::Module {
  explicit LlamaDecoderLayerImpl(const TextConfig& cfg);
  /// One pre-norm residual block (HF LlamaDecoderLayer): h + self_attn(input_layernorm(h)), then
  /// + mlp(post_attention_layernorm(·)). @param h [B, T, D]; the other parameters as
  /// LlamaAttentionImpl::forward (the cache gains the T new keys/values). @return [B, T, D].
  at::Tensor forward(const at::Tensor& h, const Rotary& rot, LayerKvCache& cache, const at::Tensor& valid,
                     const at::Tensor& mask, const at::Tensor& probs_rows = {},
                     at::Tensor* probs_out = nullptr, const at::Tensor& key_gate = {},
                     bool gate_own_key = false);
  LlamaAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
  LlamaRmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(LlamaDecoderLayer);

/// The decoder stack ("model." in LlamaForCausalLM).
struct LlamaModelImpl : torch::nn::Module {
  explicit LlamaModelImpl(const TextConfig& cfg);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  LlamaRmsNorm norm{nullptr};
  TextConfig cfg;
};
TORCH_MODULE(LlamaModel);

/// Per-forward measurements of the decoder.
struct DecoderStats {
  std::vector<int64_t> tokens_per_layer;  ///< T entering each layer (after any pruning before it)
};

/// LlamaForCausalLM: decoder + lm_head (tied to embed_tokens when tie_word_embeddings).
struct LlamaForCausalLMImpl : torch::nn::Module {
  explicit LlamaForCausalLMImpl(const TextConfig& cfg);

  /// Token embeddings. @param ids [B, T] int64 in [0, V) @return [B, T, D] compute dtype.
  at::Tensor embed(const at::Tensor& ids);

  /// Runs the decoder over `state` (prefill when the cache is empty, decode otherwise), appending each
  /// layer's keys/values to `cache`. When `hook` is given, before each layer it acts on, the hook may drop
  /// tokens: they are removed from the hidden states, positions and masks, so later layers compute and cache
  /// survivors only.
  /// @return final hidden states after the last layer and norm, [B, T', D]; `state` is updated to the
  ///         surviving tokens (T' ≤ T).
  at::Tensor forward(TokenState& state, KvCache& cache, PrefillHook* hook = nullptr,
                     DecoderStats* stats = nullptr);

  /// Training-mode prefill with soft pruning (VisPCO §3.2; the learned gate's training, prune/gate.h): no
  /// token is removed; before each layer `hook` may set a key gate [B, T] that multiplies every token's
  /// weight as an attention key from that layer on (attention_gated(), the query's own key included when
  /// hook.gates_own_key()). Differentiable in the gates. Runs on a fresh cache (prefill only).
  /// @param state prefill tokens [B, T, …]; state.hidden is left at the last layer's output.
  /// @return final hidden states after the norm, [B, T, D].
  at::Tensor forward_gated(TokenState& state, KeyGateHook& hook);

  /// Logits of hidden states. @param h [B, T, D] @return [B, T, V] fp32.
  at::Tensor logits(const at::Tensor& h);

  LlamaModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  ///< unset (nullptr) when tied to embed_tokens
  TextConfig cfg;

 private:
  /// The one layer loop behind forward() and forward_gated(): before each layer the key-gate hook (soft
  /// pruning, training) sets the gate or the prefill hook (physical pruning, inference) removes tokens; at
  /// most one of `hook`, `gate_hook` is given (the latter needs an empty cache).
  at::Tensor run_layers(TokenState& state, KvCache& cache, PrefillHook* hook, KeyGateHook* gate_hook,
                        DecoderStats* stats);
};
TORCH_MODULE(LlamaForCausalLM);

}  // namespace vispco
