// FLOPs of one image through the Qwen2-VL / Qwen2.5-VL vision tower (model/qwen2_vl/vision.h), for the cost
// model: matrix products only, counted as 2 × multiply-adds (norms, rotary, softmax, activations and the
// window reordering are left out: O(N_p · E) against the products' O(N_p · E²) and O(N_p · L · E)).
#pragma once
#include <cstdint>
#include <vector>

#include "model/qwen2_vl/vision_config.h"

namespace vispco {

/// One image's tower FLOPs by part (2 × multiply-adds). N_p = t·h·w patches, E, I, D, m as in the config.
struct QwenVisionFlops {
  double patch_embed = 0;  ///< 2·N_p·(C·T·P²)·E
  std::vector<double> blocks;  ///< per block: qkv 2·N_p·E·3E + proj 2·N_p·E² + attention 4·E·Σ_s L_s² (q·kᵀ
                               ///< and p·v over the segments s: whole frames, or Qwen2.5-VL's windows) +
                               ///< MLP 4·N_p·E·I (fc1/fc2) or 6·N_p·E·I (gate/up/down)
  double merger = 0;  ///< 2·N_v·(m²E)² + 2·N_v·m²E·D, N_v = N_p / m²
  /// Whether block i attended over whole frames (Qwen2-VL: all; Qwen2.5-VL: fullatt_block_indexes).
  std::vector<bool> full_attention;
  double total() const;
};

/// The FLOPs of one forward of Qwen2VisionTransformer on a t × h × w patch grid (qwen_preprocess's grid).
/// @throws InvalidArgument for a grid that is not a positive multiple of m (as the forward).
QwenVisionFlops qwen_vision_flops(const Qwen2VisionConfig& cfg, int64_t grid_t, int64_t grid_h,
                                  int64_t grid_w);

}  // namespace vispco
