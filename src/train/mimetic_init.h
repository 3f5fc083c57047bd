// Mimetic initialisation of self-attention (Trockman & Kolter, "Mimetic Initialization of Self-Attention
// Layers", ICML 2023): instead of independent random W_q, W_k, W_v, W_o, start from W_q W_kᵀ ≈ I (a token
// attends to tokens that look like it) and W_o W_v ≈ α·I (what is attended to is copied into the residual),
// the structure trained attention layers show. It shortens the plateau before a from-scratch model learns
// in-context retrieval. Deviation: the paper targets ViTs with W_o W_v ≈ −α·I; a causal decoder that must
// copy what it finds uses +α (their language-model variant), and with grouped-query attention the G query
// heads of a kv head start as noisy copies of one query projection.
#pragma once
#include "model/llama.h"

namespace vispco::train {

/// Re-initialises every decoder layer's q/k/v/o projections of `lm` in place (no autograd), drawing from the
/// global LibTorch generator: q rows ~ N(0, 1/D); the k rows of kv head j = the q rows of its first query
/// head + N(0, (0.2)²/D) noise; the other query heads of the group = that q + N(0, (0.5)²/D); v ~ N(0, 1/D);
/// o's block of head h = (α / G) · v_jᵀ, so that W_o W_v = α · Σ_j v_jᵀ v_j (a scaled projection).
/// @throws InvalidArgument when alpha < 0.
void mimetic_attention_init(LlamaForCausalLM& lm, double alpha = 0.5);

}  // namespace vispco::train
