// Analytic FLOPs model of a VLM (DESIGN.md §1): the per-image encoder cost a model family states (FlopsSpec;
// LLaVA's CLIP tower and projector in model/llava_flops.h), a Llama-style decoder with GQA and SwiGLU at a
// per-layer token count (so pruning plans can be costed), the LM head, and one decode step.
// Also the simplified per-layer formula of FastV (Chen et al., ECCV 2024 §4) / PyramidDrop for comparability.
//
// Conventions (all functions): one multiply–add = 2 FLOPs; only matrix products are counted (biases,
// norms, softmax, activations, RoPE, residual adds and embedding lookups are left out: O(n·d), < 1%).
// Attention over S keys counts all n·S query–key pairs (QKᵀ and the weighted sum of V, 2·2·n·S·H·D_h):
// the causal mask's halving is NOT applied, as in the FastV/PyramidDrop accounting, so ratios compare with
// the papers'. The engine computes fewer since issue 63: a prefill of n > 512 positions skips, per chunk of
// 256 queries, the keys after the chunk (model/attention_chunks.h) — about (1 + 256/n)/2 of the n² pairs — so
// at thousands of positions a measured speedup can exceed the FLOPs one where attention was a large share of
// the unpruned prefill. Counts are exact integers (int64, no overflow below ~10¹⁸ FLOPs).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace vispco {

/// Decoder dimensions the FLOPs model reads (a Llama-style decoder: GQA attention, SwiGLU MLP, LM head).
/// A model family fills it from its config (model/shape.h); the formulas below need nothing else.
struct DecoderFlopsSpec {
  int64_t hidden_size = 0;        ///< D
  int64_t intermediate_size = 0;  ///< SwiGLU width m
  int64_t num_layers = 0;         ///< L
  int64_t num_heads = 0;          ///< H
  int64_t num_kv_heads = 0;       ///< H_kv
  int64_t head_dim = 0;           ///< D_h
  int64_t vocab_size = 0;         ///< V, rows of the LM head
  bool operator==(const DecoderFlopsSpec&) const = default;
};

/// What one image and the decoder cost, as a model family describes them: the per-image encoder parts
/// are counted by the family (it knows its tower), the decoder parts by prefill_flops() per layer.
struct FlopsSpec {
  int64_t n_visual_tokens = 0;     ///< N_v, visual tokens one image puts into the decoder
  int64_t vision_patch_embed = 0;  ///< patch embedding of one image, FLOPs
  int64_t vision_layers = 0;       ///< the encoder layers that run for one image, FLOPs
  int64_t projector = 0;           ///< the projector at N_v tokens, FLOPs
  DecoderFlopsSpec decoder;
  bool operator==(const FlopsSpec&) const = default;
};

/// FLOPs of one decoder layer.
struct DecoderLayerFlops {
  int64_t n_tokens = 0;     ///< n, new tokens through the layer (queries)
  int64_t n_keys = 0;       ///< S, keys each query attends to (= n in prefill; cache length + 1 in decode)
  int64_t projections = 0;  ///< q_proj + o_proj: 2·2·n·D·(H·D_h); k_proj + v_proj: 2·2·n·D·(H_kv·D_h)
  int64_t attention = 0;    ///< QKᵀ and P·V: 2·2·n·S·H·D_h (no causal halving)
  int64_t mlp = 0;          ///< SwiGLU gate, up, down: 2·3·n·D·m
  int64_t total() const { return projections + attention + mlp; }
  bool operator==(const DecoderLayerFlops&) const = default;
};

/// FLOPs of one prefill, broken down by part.
struct PrefillFlops {
  int64_t vision_patch_embed = 0;  ///< FlopsSpec::vision_patch_embed (LLaVA: 2·grid²·D_v·(C·p²))
  int64_t vision_layers = 0;       ///< FlopsSpec::vision_layers (LLaVA: the used CLIP layers at grid² + 1)
  int64_t vision = 0;              ///< vision_patch_embed + vision_layers
  int64_t projector = 0;           ///< FlopsSpec::projector (LLaVA: 2·N_v·(D_v·D + D·D))
  std::vector<DecoderLayerFlops> decoder;  ///< one entry per decoder layer ℓ = 0..L−1
  int64_t decoder_total = 0;               ///< sum of decoder[ℓ].total()
  int64_t lm_head = 0;                     ///< 2·D·V per position computed (the last one, or all n_{L−1})
  int64_t total = 0;                       ///< vision + projector + decoder_total + lm_head
  nlohmann::json to_json() const;
};

/// FLOPs of one decode step (one new token per sequence, batch 1).
struct DecodeFlops {
  std::vector<DecoderLayerFlops> decoder;  ///< per layer: n = 1, S = that layer's cache length + 1
  int64_t decoder_total = 0;               ///< sum over layers
  int64_t lm_head = 0;                     ///< 2·D·V
  int64_t total = 0;                       ///< decoder_total + lm_head
};

/// Options of prefill_flops().
struct FlopsOptions {
  /// Apply the LM head to every position of the last layer instead of the last one only (generation needs
  /// the last position's logits; teacher-forced scoring needs all).
  bool lm_head_all_positions = false;
};

/// One ViT encoder layer (CLIP's) of width `hidden_size` = D_v and MLP width `intermediate_size` = m_v at
/// `n_tokens` tokens: q,k,v,out projections 4·2·n·D_v², attention 2·2·n²·D_v, MLP fc1 + fc2 2·2·n·D_v·m_v.
/// @throws InvalidArgument when n_tokens < 1.
int64_t vision_layer_flops(int64_t hidden_size, int64_t intermediate_size, int64_t n_tokens);

/// One decoder layer with `n_tokens` queries attending to `n_keys` keys (prefill: n_keys = n_tokens).
/// @throws InvalidArgument when n_tokens < 1 or n_keys < n_tokens.
DecoderLayerFlops decoder_layer_flops(const DecoderFlopsSpec& t, int64_t n_tokens, int64_t n_keys);

/// The LM head on `n_positions` positions: 2·n·D·V. @throws InvalidArgument when n_positions < 0.
int64_t lm_head_flops(const DecoderFlopsSpec& t, int64_t n_positions);

/// Tokens entering each decoder layer without pruning: L copies of n_text + N_v.
/// @param n_text text tokens of the prompt (BOS included, the image placeholder excluded), ≥ 0.
std::vector<int64_t> unpruned_tokens_per_layer(const FlopsSpec& spec, int64_t n_text);

/// Prefill FLOPs of one image + prompt (batch 1).
/// @param tokens_per_layer [L] tokens entering each decoder layer (after any pruning before it), each ≥ 1.
/// @throws InvalidArgument when tokens_per_layer does not hold L entries or an entry is < 1.
PrefillFlops prefill_flops(const FlopsSpec& spec, const std::vector<int64_t>& tokens_per_layer,
                           const FlopsOptions& opts = {});

/// FLOPs of generating one token after the prefill.
/// @param cache_len_per_layer [L] positions already cached at each layer (pruned layers hold fewer), ≥ 0.
/// @throws InvalidArgument when the vector does not hold L entries or an entry is negative.
DecodeFlops decode_step_flops(const FlopsSpec& spec, const std::vector<int64_t>& cache_len_per_layer);

/// The simplified per-layer count of FastV / PyramidDrop, 4·n·d² + 2·n²·d + 2·n·d·m, kept verbatim for
/// comparison with those papers. It counts a multiply–add as ONE operation, assumes MHA and a 2-matrix FFN,
/// so it is not on the same scale as decoder_layer_flops(); use it for ratios only.
/// @throws InvalidArgument when n < 1, d < 1 or m < 1.
int64_t simplified_layer_flops(int64_t n, int64_t d, int64_t m);

/// Sum of simplified_layer_flops(n_ℓ, D, m) over the decoder layers. @throws as prefill_flops().
int64_t simplified_decoder_flops(const DecoderFlopsSpec& t, const std::vector<int64_t>& tokens_per_layer);

}  // namespace vispco
