// The decoder half of a family's FLOPs spec (cost/flops.h DecoderFlopsSpec) from the shared Llama-style
// decoder's config, written once for every family (model/llava/llava_shape.cpp, model/qwen2_vl/qwen2_vl.cpp).
#pragma once
#include "cost/flops.h"
#include "model/text_config.h"

namespace vispco {

/// D, m, L, H, H_kv, D_h and V of `t` as the FLOPs model reads them.
inline DecoderFlopsSpec decoder_flops_spec(const TextConfig& t) {
  return {.hidden_size = t.hidden_size,
          .intermediate_size = t.intermediate_size,
          .num_layers = t.num_hidden_layers,
          .num_heads = t.num_attention_heads,
          .num_kv_heads = t.n_kv_heads(),
          .head_dim = t.d_head(),
          .vocab_size = t.vocab_size};
}

}  // namespace vispco
