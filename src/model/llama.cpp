// Llama decoder forward with KV cache and in-forward token removal (physical pruning).
#include "model/llama.h"

#include <ATen/ATen.h>

#include "model/blocks.h"
#include "model/dense_linear.h"
#include "model/quant.h"

namespace vispco {

namespace {
torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}
}  // namespace

LlamaAttentionImpl::LlamaAttentionImpl(const TextConfig& cfg)
    : n_heads(cfg.num_attention_heads), n_kv_heads(cfg.n_kv_heads()), d_head(cfg.d_head()) {
  const int64_t d = cfg.hidden_size;
  const bool qkv_bias = cfg.attention_bias || cfg.qkv_bias;
  q_proj = register_module("q_proj", linear(d, n_heads * d_head, qkv_bias));
  k_proj = register_module("k_proj", linear(d, n_kv_heads * d_head, qkv_bias));
  v_proj = register_module("v_proj", linear(d, n_kv_heads * d_head, qkv_bias));
  o_proj = register_module("o_proj", linear(n_heads * d_head, d, cfg.attention_bias));
}

at::Tensor LlamaAttentionImpl::forward(const at::Tensor& x, const Rotary& rot, LayerKvCache& cache,
                                       const at::Tensor& valid, const at::Tensor& mask,
                                       const at::Tensor& probs_rows, at::Tensor* probs_out,
                                       const at::Tensor& key_gate, bool gate_own_key) {
  const int64_t B = x.size(0), T = x.size(1);
  auto q = linear_forward(q_proj, x).view({B, T, n_heads, d_head}).transpose(1, 2);
  auto k = linear_forward(k_proj, x).view({B, T, n_kv_heads, d_head}).transpose(1, 2);
  auto v = linear_forward(v_proj, x).view({B, T, n_kv_heads, d_head}).transpose(1, 2);
  q = apply_rotary(q, rot);
  k = apply_rotary(k, rot);
  const int64_t past = cache.length();
  cache.append(k, v, valid);
  auto out = key_gate.defined()
                 ? attention_gated(q, cache.keys(), cache.values(), mask, key_gate, past, probs_rows,
                                   probs_out, gate_own_key)
                 : attention(q, cache.keys(), cache.values(), mask, probs_rows, probs_out, past);
  return linear_forward(o_proj, out);
}

LlamaMlpImpl::LlamaMlpImpl(const TextConfig& cfg) {
  gate_proj = register_module("gate_proj", linear(cfg.hidden_size, cfg.intermediate_size, false));
  up_proj = register_module("up_proj", linear(cfg.hidden_size, cfg.intermediate_size, false));
  down_proj = register_module("down_proj", linear(cfg.intermediate_size, cfg.hidden_size, false));
}

at::Tensor LlamaMlpImpl::forward(const at::Tensor& x) {
  return linear_forward(down_proj, at::silu(linear_forward(gate_proj, x)) * linear_forward(up_proj, x));
}

LlamaRmsNormImpl::LlamaRmsNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const TextConfig& cfg) {
  self_attn = register_module("self_attn", LlamaAttention(cfg));
  mlp = register_module("mlp", LlamaMlp(cfg));
  input_layernorm = register_module("input_layernorm", LlamaRmsNorm(cfg.hidden_size, cfg.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", LlamaRmsNorm(cfg.hidden_size, cfg.rms_norm_eps));
}

at::Tensor LlamaDecoderLayerImpl::forward(const at::Tensor& h, const Rotary& rot, LayerKvCache& cache,
                                          const at::Tensor& valid, const at::Tensor& mask,
                                          const at::Tensor& probs_rows, at::Tensor* probs_out,
                                          const at::Tensor& key_gate, bool gate_own_key) {
  auto x = h + self_attn->forward(input_layernorm(h), rot, cache, valid, mask, probs_rows, probs_out,
                                  key_gate, gate_own_key);
  return x + mlp->forward(post_attention_layernorm(x));
}

LlamaModelImpl::LlamaModelImpl(const TextConfig& c) : cfg(c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(cfg.vocab_size, cfg.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) layers->push_back(LlamaDecoderLayer(cfg));
  norm = register_module("norm", LlamaRmsNorm(cfg.hidden_size, cfg.rms_norm_eps));
}

LlamaForCausalLMImpl::LlamaForCausalLMImpl(const TextConfig& c) : cfg(c) {
  model = register_module("model", LlamaModel(cfg));
  if (!cfg.tie_word_embeddings)
    lm_head = register_module("lm_head", linear(cfg.hidden_size, cfg.vocab_size, false));
}

at::Tensor LlamaForCausalLMImpl::embed(const at::Tensor& ids) { return model->embed_tokens(ids); }

at::Tensor LlamaForCausalLMImpl::forward(TokenState& state, KvCache& cache, PrefillHook* hook,
                                         DecoderStats* stats) {
  return run_layers(state, cache, hook, nullptr, stats);
}

at::Tensor LlamaForCausalLMImpl::forward_gated(TokenState& state, KeyGateHook& hook) {
  KvCache cache(cfg.num_hidden_layers);
  return run_layers(state, cache, nullptr, &hook, nullptr);
}

at::Tensor LlamaForCausalLMImpl::run_layers(TokenState& state, KvCache& cache, PrefillHook* hook,
                                            KeyGateHook* gate_hook, DecoderStats* stats) {
  const int64_t n_layers = cfg.num_hidden_layers;
  TORCH_CHECK(static_cast<int64_t>(cache.layers.size()) == n_layers, "KV cache has ", cache.layers.size(),
              " layers, decoder has ", n_layers);
  TORCH_CHECK(gate_hook == nullptr || (hook == nullptr && cache.layers[0].length() == 0),
              "a key-gate hook runs alone on a fresh cache (prefill)");
  auto rot = rotary_tables(state.positions, cfg.d_head(), cfg.rope_theta, state.hidden.scalar_type(),
                           cfg.mrope_section);
  at::Tensor mask;
  int64_t mask_past = -1;       // cache length the mask was built for
  at::Tensor mask_cache_valid;  // and the cached keys' validity [B, S] it was built from
  at::Tensor attn_rows, key_gate;
  LayerSignals signals;
  const bool gate_own_key = gate_hook != nullptr && gate_hook->gates_own_key();
  auto h = state.hidden;
  for (int64_t l = 0; l < n_layers; ++l) {
    // Soft pruning (training): the gate from this layer on, from what layer l−1 measured.
    if (gate_hook != nullptr) {
      state.hidden = h;
      auto g = gate_hook->gate(l, state, signals.attn_rows);
      if (g.defined()) key_gate = g;
    }
    // Physical pruning (inference): the hook may remove tokens before this layer.
    if (hook != nullptr && hook->acts_before(l)) {
      state.hidden = h;
      if (hook->apply(l, state, signals)) {
        h = state.hidden;
        rot =
            rotary_tables(state.positions, cfg.d_head(), cfg.rope_theta, h.scalar_type(), cfg.mrope_section);
        mask_past = -1;
      }
    }
    signals = LayerSignals();
    state.hidden = h;
    attn_rows = hook != nullptr        ? hook->attention_rows(l, state)
                : gate_hook != nullptr ? gate_hook->attention_rows(l, state)
                                       : at::Tensor();
    auto& layer = *model->layers[l]->as<LlamaDecoderLayerImpl>();
    auto& lc = cache.layers[l];
    const int64_t T = h.size(1);
    // Keys visible to this layer: its cached ones plus the T new ones. Layers of equal cache length share a
    // mask unless their padding differs (a cache joined from groups pruned differently,
    // model/decode_batch.h).
    if (mask_past != lc.length() ||
        (cache.joined() && lc.length() > 0 && !at::equal(mask_cache_valid, lc.valid()))) {
      auto key_valid = lc.length() > 0 ? at::cat({lc.valid(), state.valid}, 1) : state.valid;
      mask = causal_mask(key_valid, T, lc.length());
      mask_past = lc.length();
      mask_cache_valid = lc.length() > 0 ? lc.valid() : at::Tensor();
    }
    if (stats != nullptr) stats->tokens_per_layer.push_back(T);
    h = layer.forward(h, rot, lc, state.valid, mask, attn_rows,
                      attn_rows.defined() ? &signals.attn_rows : nullptr, key_gate, gate_own_key);
    if (hook != nullptr && hook->wants_keys(l)) signals.keys = lc.keys();
  }
  state.hidden = h;
  return model->norm(h);
}

at::Tensor LlamaForCausalLMImpl::logits(const at::Tensor& h) {
  if (lm_head) return linear_forward(lm_head, h).to(at::kFloat);
  return dense_linear(h, model->embed_tokens->weight).to(at::kFloat);
}

}  // namespace vispco
