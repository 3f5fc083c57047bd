// The vision tower's configuration of Qwen2-VL and Qwen2.5-VL (transformers v4.55 Qwen2VLVisionConfig,
// models/qwen2_vl/configuration_qwen2_vl.py, and Qwen2_5_VLVisionConfig, models/qwen2_5_vl/
// configuration_qwen2_5_vl.py), read from config.json's "vision_config" under the published field names.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco {

/// Which of the two towers: they share the patch embedding, the 2-D rotary ViT and the 2×2 patch merger.
enum class QwenVisionArch {
  kQwen2VL,   ///< Qwen2-VL: LayerNorm (with bias), fc1 → act → fc2 MLP, full attention in every block
  kQwen25VL,  ///< Qwen2.5-VL: RMSNorm, SwiGLU MLP with biases, window attention except fullatt blocks
};

/// One tower's shape. Defaults are Qwen2VLVisionConfig's (the struct as constructed is Qwen2-VL's;
/// qwen25_vision_defaults() gives Qwen2_5_VLVisionConfig's). E = embed_dim below.
struct Qwen2VisionConfig {
  QwenVisionArch arch = QwenVisionArch::kQwen2VL;  ///< the variant; from the architecture, not a JSON key
  int64_t depth = 32;                              ///< ViT blocks, ≥ 1
  /// E, the ViT width: Qwen2-VL's vision_config.embed_dim, Qwen2.5-VL's vision_config.hidden_size; > 0.
  int64_t embed_dim = 1280;
  int64_t num_heads = 16;  ///< attention heads; E / num_heads must be a multiple of 4 (2-D rotary)
  /// MLP width: Qwen2-VL's int(embed_dim · mlp_ratio), Qwen2.5-VL's vision_config.intermediate_size; > 0.
  int64_t intermediate_size = 5120;
  int64_t in_channels = 3;          ///< image channels ("in_channels", or the published "in_chans"); > 0
  int64_t patch_size = 14;          ///< P, patch side, pixels; > 0
  int64_t temporal_patch_size = 2;  ///< frames per patch (an image is repeated to fill them); > 0
  int64_t spatial_merge_size = 2;   ///< m, the merger concatenates m × m patches into one visual token; > 0
  /// D, the merger's output width (the LLM's): Qwen2-VL's vision_config.hidden_size, Qwen2.5-VL's
  /// vision_config.out_hidden_size; > 0.
  int64_t out_hidden_size = 3584;
  /// Activation of the ViT MLP (Qwen2-VL: fc1 → act → fc2; Qwen2.5-VL: the SwiGLU gate); a name
  /// activation() (model/blocks.h) knows: silu, gelu, gelu_pytorch_tanh, quick_gelu.
  std::string hidden_act = "quick_gelu";
  /// Qwen2.5-VL's attention window side, pixels: a window is window_size / P / m merged tokens a side; a
  /// positive multiple of P · m. 0 for Qwen2-VL (no windows).
  int64_t window_size = 0;
  /// Qwen2.5-VL's blocks that attend over the whole image, each in [0, depth); empty for Qwen2-VL.
  std::vector<int64_t> fullatt_block_indexes;
  /// Qwen2.5-VL's video time scale (temporal M-RoPE positions per second); unused for images, kept so
  /// config.json round-trips. 0 for Qwen2-VL.
  int64_t tokens_per_second = 0;
  /// Epsilon of every norm in the tower and merger (transformers hard-codes 1e-6; not a config.json key); >
  /// 0.
  double eps = 1e-6;

  /// True for Qwen2.5-VL: RMSNorm, SwiGLU, window attention.
  bool windowed_rms_swiglu() const { return arch == QwenVisionArch::kQwen25VL; }
  /// D_h = E / num_heads.
  int64_t head_dim() const { return embed_dim / num_heads; }
  /// Window side in merged tokens (window_size / P / m); 0 for Qwen2-VL.
  int64_t window_merged() const {
    return window_size > 0 ? window_size / patch_size / spatial_merge_size : 0;
  }
  /// Values per pixel_values row: in_channels · temporal_patch_size · P².
  int64_t patch_values() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  /// Whether block `i` attends over the whole image (every block for Qwen2-VL).
  bool full_attention_block(int64_t i) const;

  /// Checks every field. @param where the prefix of messages ("vision_config").
  /// @throws ConfigError naming the field, its value and the valid range.
  void validate(const std::string& where = "vision_config") const;
  bool operator==(const Qwen2VisionConfig&) const = default;
};

/// Qwen2_5_VLVisionConfig's class defaults (depth 32, hidden_size 3584, intermediate_size 3420, 16 heads,
/// silu, window_size 112, fullatt_block_indexes [7, 15, 23, 31], out_hidden_size 3584, tokens_per_second 4).
/// The published checkpoints override several of them (Qwen2.5-VL-3B/7B: hidden_size 1280).
Qwen2VisionConfig qwen25_vision_defaults();

/// Parses a config.json "vision_config" object. Qwen2-VL reads depth, embed_dim, mlp_ratio (int or float:
/// the MLP width is int(embed_dim · mlp_ratio), as transformers computes it), num_heads, in_channels or
/// in_chans, patch_size, spatial_merge_size, temporal_patch_size, hidden_size (→ out_hidden_size),
/// hidden_act; Qwen2.5-VL reads depth, hidden_size (→ embed_dim), intermediate_size, num_heads,
/// in_channels / in_chans, out_hidden_size, patch_size, spatial_merge_size, temporal_patch_size, hidden_act,
/// window_size, fullatt_block_indexes, tokens_per_second. Absent (or null) fields take the class's defaults;
/// other keys (model_type, spatial_patch_size, initializer_range, ...) are ignored. The result is validated.
/// @param qwen25 Qwen2.5-VL's fields and defaults instead of Qwen2-VL's.
/// @param where the object's name in messages ("vision_config").
/// @throws ConfigError for a non-object, a field of the wrong JSON type (named), or a failed validate().
Qwen2VisionConfig qwen2_vision_config_from_json(const nlohmann::json& vision_config, bool qwen25,
                                                const std::string& where = "vision_config");

/// The "vision_config" object under the published field names of the config's arch (Qwen/Qwen2-VL-*:
/// embed_dim, mlp_ratio, hidden_size = out_hidden_size, ...; Qwen/Qwen2.5-VL-*: hidden_size = embed_dim,
/// intermediate_size, out_hidden_size, window_size, fullatt_block_indexes, ...; both in_chans and
/// in_channels, spatial_patch_size = patch_size). Reads back through qwen2_vision_config_from_json to an
/// equal config (eps excepted: not a config.json key).
nlohmann::json to_json(const Qwen2VisionConfig& cfg);

}  // namespace vispco
