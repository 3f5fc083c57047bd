// Bounded-memory attention for long prefills (issue 48: at ~2,900 positions and 32 heads one layer's fp32
// score block [B, H, T, S] is ~1 GB): the query rows are computed in chunks, each row's softmax over all S
// keys, so the result is attention()'s (model/blocks.h) up to the GEMM's summation order.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vispco {

/// Bytes of fp32 attention scores attention() materialises at once, at most (one query chunk's block).
inline constexpr int64_t kAttentionScoreBudgetBytes = int64_t(64) << 20;

/// Query rows per chunk: ⌊budget / (B·H·S·4)⌋, at least 1.
int64_t attention_query_chunk(int64_t batch, int64_t heads, int64_t n_keys,
                              int64_t budget_bytes = kAttentionScoreBudgetBytes);

/// attention() (model/blocks.h: same arguments, shapes and result) computed in query chunks whose fp32 score
/// block stays within `budget_bytes`; one block when all T rows fit. The probs_rows rows are gathered from
/// the chunk that holds each of them.
at::Tensor attention_in_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& mask, const at::Tensor& probs_rows, at::Tensor* probs_out,
                               int64_t budget_bytes);

}  // namespace vispco
