// Bounded-memory attention for long prefills (issue 48: at ~2,900 positions and 32 heads one layer's fp32
// score block [B, H, T, S] is ~1 GB): the query rows are computed in chunks, each row's softmax over all S
// keys, so the result is attention()'s (model/blocks.h) up to the GEMM's summation order.
// Under a causal mask a chunk of queries [t0, t0 + c) cannot see keys after past + t0 + c − 1: those keys are
// skipped, not computed and masked (issue 63), so a T-row prefill scores ≈ T²/2 + T·c/2 query–key pairs
// instead of T² — exact for every query that sees a key, since a masked key's weight exp(lowest − max) is
// exactly 0 in fp32. A left-padding query that sees no key gets uniform weights over the keys its chunk
// computes instead of over all S (a finite row either way; nothing reads padding rows: their keys are masked
// in every later layer and losses and logits skip them).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vispco {

/// Bytes of fp32 attention scores attention() materialises at once, at most (one query chunk's block).
inline constexpr int64_t kAttentionScoreBudgetBytes = int64_t(64) << 20;

/// Query rows per chunk: ⌊budget / (B·H·S·4)⌋, at least 1.
int64_t attention_query_chunk(int64_t batch, int64_t heads, int64_t n_keys,
                              int64_t budget_bytes = kAttentionScoreBudgetBytes);

/// Query rows per chunk when the keys after each chunk are skipped (causal attention): the budget's chunk,
/// at most kCausalChunkRows rows once T > 2·kCausalChunkRows (the skipped share grows as the chunks shrink:
/// (1 + c/T)/2 of the T² pairs are computed), T (one chunk) below.
inline constexpr int64_t kCausalChunkRows = 256;
int64_t causal_query_chunk(int64_t batch, int64_t heads, int64_t n_queries, int64_t n_keys,
                           int64_t budget_bytes = kAttentionScoreBudgetBytes);

/// attention() (model/blocks.h: same arguments, shapes and result) computed in query chunks whose fp32 score
/// block stays within `budget_bytes`; one block when all T rows fit and no key can be skipped. The probs_rows
/// rows are gathered from the chunk that holds each of them (skipped keys: probability 0).
/// @param causal_past −1: the mask may let any query see any key (every key is computed). ≥ 0: the mask is
///        causal by cache index with this many keys before the T queries (causal_mask()'s `past`), so query t
///        sees no key after causal_past + t and a chunk skips the keys none of its queries sees.
/// @throws c10::Error when the heads do not group, causal_past + T > S, or causal_past ≥ 0 without a mask.
at::Tensor attention_in_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& mask, const at::Tensor& probs_rows, at::Tensor* probs_out,
                               int64_t budget_bytes, int64_t causal_past = -1);

}  // namespace vispco
