// The shapes of a decoder layer's linear layers, shared by the benchmark programs.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "model/text_config.h"

namespace vispco::bench {

/// [out, in] of one decoder layer's seven products, in order q, k, v, o, gate, up, down (Llama / Qwen2
/// layout: GQA projections of n_heads · d_head and n_kv_heads · d_head, SwiGLU of intermediate_size).
inline std::array<std::pair<int64_t, int64_t>, 7> decoder_layer_linear_shapes(const TextConfig& t) {
  const int64_t d = t.hidden_size, kv = t.n_kv_heads() * t.d_head(), q = t.num_attention_heads * t.d_head();
  const int64_t m = t.intermediate_size;
  return {{{q, d}, {kv, d}, {kv, d}, {d, q}, {m, d}, {m, d}, {d, m}}};
}

}  // namespace vispco::bench
