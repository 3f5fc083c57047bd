// Model configuration in the Hugging Face LLaVA-1.5 form (transformers' LlavaConfig with a CLIPVisionConfig
// and a LlamaConfig). Fields absent from config.json take transformers' class defaults, as HF does, so the
// real llava-hf/llava-1.5-7b-hf config.json (which omits most Llama fields) parses to the right model.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/text_config.h"

namespace vispco {

/// CLIP vision tower (transformers CLIPVisionConfig). Defaults are CLIPVisionConfig's.
struct VisionConfig {
  int64_t hidden_size = 768;              ///< D_v, width of the tower
  int64_t intermediate_size = 3072;       ///< MLP width
  int64_t num_hidden_layers = 12;         ///< encoder layers
  int64_t num_attention_heads = 12;       ///< heads; hidden_size must divide evenly
  int64_t image_size = 224;               ///< input side, pixels
  int64_t patch_size = 32;                ///< patch side, pixels; image_size must be a multiple
  int64_t num_channels = 3;               ///< input channels (RGB)
  std::string hidden_act = "quick_gelu";  ///< "quick_gelu" | "gelu"
  double layer_norm_eps = 1e-5;           ///< LayerNorm epsilon

  /// Patches per side (image_size / patch_size); N_v = grid² before the select strategy drops [CLS].
  int64_t grid() const { return image_size / patch_size; }
  bool operator==(const VisionConfig&) const = default;
};

/// CLIP ViT-L/14 at 336 px (openai/clip-vit-large-patch14-336): the tower of LLaVA-1.5 and LLaVA-v1.6.
VisionConfig clip_vit_l14_336();

/// LLaVA-1.5 (transformers LlavaConfig).
struct LlavaConfig {
  VisionConfig vision;
  TextConfig text;
  int64_t image_token_index = 32000;          ///< placeholder id of <image> in prompts
  int64_t pad_token_id = -1;                  ///< −1 when absent
  std::string projector_hidden_act = "gelu";  ///< "gelu" | "quick_gelu"
  int64_t vision_feature_layer = -2;  ///< index into the tower's hidden states (−2: second-to-last layer)
  std::string vision_feature_select_strategy = "default";  ///< "default" drops [CLS]; "full" keeps it
  bool projector_bias = true;                              ///< multimodal_projector_bias

  /// Visual tokens per image: grid², plus one when the strategy is "full".
  int64_t n_visual_tokens() const;
  /// Number of tower layers that must run to reach `vision_feature_layer`.
  int64_t n_vision_layers_used() const;
  bool operator==(const LlavaConfig&) const = default;

  /// Checks every field; @throws ConfigError naming the field, its value and the valid range.
  void validate() const;
};

/// Parses a transformers config.json object (model_type "llava"). Missing fields take HF defaults.
/// @throws ConfigError for an unknown model_type/architecture or a field of the wrong type.
LlavaConfig llava_config_from_json(const nlohmann::json& j);
/// Serialises to the transformers config.json form (round-trips through llava_config_from_json).
nlohmann::json llava_config_to_json(const LlavaConfig& cfg);
/// Reads and validates `<dir>/config.json`, or the header of a GGUF pair when `dir` names one
/// (resolve_model_source). @throws IoError (no such folder, unreadable file), FormatError (bad
/// JSON), ConfigError.
LlavaConfig load_llava_config(const std::string& dir);

}  // namespace vispco
