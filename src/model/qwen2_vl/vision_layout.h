// Where each patch of a Qwen2-VL / Qwen2.5-VL image sits for the vision tower: its (row, column) in the
// merge-blocked order of pixel_values, the 2-D rotary angles of those positions, and Qwen2.5-VL's attention
// windows (transformers v4.55 modeling_qwen2_vl.py rot_pos_emb / VisionRotaryEmbedding,
// modeling_qwen2_5_vl.py get_window_index). Integer bookkeeping on the CPU; no model weights.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vispco {

/// Base of the ViT's rotary frequencies (transformers hard-codes it).
inline constexpr double kQwenVisionRopeTheta = 10000.0;

/// (row, column) of every patch in pixel_values order: [t·h·w, 2] int64 on the CPU. Merge-blocked order:
/// the m × m blocks of the h × w patch grid row-major, the patches of a block row-major; each of the t
/// frames repeats the same positions. @throws InvalidArgument when h or w is not a positive multiple of m.
at::Tensor qwen_patch_positions(int64_t grid_t, int64_t grid_h, int64_t grid_w, int64_t merge);

/// Rotary angles of the 2-D ViT positions: [N_p, D_h/2] float64 on the CPU — the first D_h/4 columns
/// row · inv_freq, the next D_h/4 column · inv_freq, inv_freq_i = 1 / θ^(2i / (D_h/2)) (i < D_h/4) built in
/// float32 as transformers builds it. The rotation uses cat(angles, angles) over the head dim (rotate-half).
/// @param positions [N_p, 2] int64 (qwen_patch_positions) @param head_dim D_h, a multiple of 4.
at::Tensor qwen_vision_rotary_angles(const at::Tensor& positions, int64_t head_dim,
                                     double theta = kQwenVisionRopeTheta);

/// Qwen2.5-VL's windows of one image (or video): the merged grid (h/m × w/m a frame) cut into windows of
/// `window_merged` × `window_merged` merged tokens from the top-left, the bottom and right ones partial.
struct QwenWindows {
  /// [t·h·w / m²] int64: the merged tokens window by window (frames, then window rows, then window columns;
  /// row-major inside a window) — get_window_index's window_index. Patches follow their merged token in
  /// units of m² (the merge-blocked order keeps a token's m² patches consecutive).
  at::Tensor order;
  /// Patches per window in `order`'s sequence (m² × the window's merged tokens), empty windows left out;
  /// they sum to t·h·w.
  std::vector<int64_t> lengths;
};

/// The windows of a t × h × w patch grid. @param merge m @param window_merged window side in merged tokens
/// (window_size / patch_size / m), ≥ 1. @throws InvalidArgument for a bad grid or window_merged < 1.
QwenWindows qwen_window_index(int64_t grid_t, int64_t grid_h, int64_t grid_w, int64_t merge,
                              int64_t window_merged);

}  // namespace vispco
