// VisionZip's token signal for the Qwen2-VL / Qwen2.5-VL towers, which have no [CLS] token (VisionZip,
// Yang et al. CVPR 2025 §3, as its adaptations to CLS-free towers do): the attention each patch RECEIVES in
// the tower's last block (head mean, mean over the queries that see it) and that block's keys, both averaged
// over the m² patches the merger joins into one visual token.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/attention_chunks.h"

namespace vispco {

/// One block's attention signal, per row of whatever it describes: the patches in the block's sequence order
/// (QwenVisionAttentionImpl), or an image's merged tokens in merged-grid row-major order (the tower).
struct QwenAttentionSignal {
  at::Tensor received;  ///< [N] fp32: mean attention received (received_attention)
  at::Tensor keys;      ///< [N, E] the block's keys, heads concatenated, after the k projection (with its
                        ///< bias) and BEFORE the rotary embedding; compute dtype
};

/// Mean attention each key receives inside its segment: for key j of a segment S (the whole frame for a
/// full-attention block, j's window for a windowed one),
///   received[j] = 1/(H·|S|) · Σ_h Σ_{i∈S} softmax_j'∈S(q_i,h · k_j',h / √D_h)[j]
/// — the column mean of the head-averaged attention matrix over the queries that can see j. The values of a
/// segment sum to 1. Computed in fp32 in query chunks whose [H, chunk, |S|] score block stays within
/// `budget_bytes` (attention_query_chunk), so no [H, N, N] tensor is held for a large segment.
/// @param q,k [N, H, D_h], as the block attends with them (after the rotary), any float dtype
/// @param lengths segment lengths in sequence order, summing to N
/// @return [N] fp32 on q's device. @throws c10::Error when the shapes differ or the lengths do not sum to N.
at::Tensor received_attention(const at::Tensor& q, const at::Tensor& k, const std::vector<int64_t>& lengths,
                              int64_t budget_bytes = kAttentionScoreBudgetBytes);

/// Rows of merged tokens put back in merged-grid row-major order: out[order[i]] = x[i] (Qwen2.5-VL's argsort
/// of the window order). @param x [N_v, ...] in window order @param order [N_v] int64 (QwenWindows::order),
/// or undefined: then x itself. @return [N_v, ...], dtype and device of x.
at::Tensor qwen_merged_grid_order(const at::Tensor& x, const at::Tensor& order);

/// Per-patch values to per-merged-token means, as the merger groups patches: the mean of each `unit` (= m²)
/// consecutive rows (one m × m block of the merge-blocked order), then qwen_merged_grid_order.
/// @param per_patch [N_p, ...] in the blocks' sequence order, N_p a multiple of unit @param order as
/// qwen_merged_grid_order @return [N_p / unit, ...] fp32 (the mean taken in fp32), on per_patch's device.
/// @throws c10::Error when N_p is not a multiple of unit.
at::Tensor qwen_merged_token_mean(const at::Tensor& per_patch, int64_t unit, const at::Tensor& order);

}  // namespace vispco
