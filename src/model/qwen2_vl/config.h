// Model configuration in the Hugging Face Qwen2-VL / Qwen2.5-VL form (transformers Qwen2VLConfig,
// Qwen2_5_VLConfig): the Qwen2 decoder's fields (at the top level as published, or under "text_config" as
// transformers ≥ 4.52 writes them), vision_config (model/qwen2_vl/vision_config.h), M-RoPE's
// rope_scaling.mrope_section, and the ids of the image placeholder and the vision span.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/qwen2_vl/vision_config.h"
#include "model/text_config.h"

namespace vispco {

/// Qwen2-VL or Qwen2.5-VL (transformers Qwen2VLConfig / Qwen2_5_VLConfig). Defaults are Qwen2-VL-7B's ids.
struct Qwen2VlConfig {
  bool qwen25 = false;  ///< Qwen2.5-VL (window attention, RMSNorm + SwiGLU tower) rather than Qwen2-VL
  /// The Qwen2 decoder: q/k/v biases (qkv_bias), GQA, RMSNorm, SwiGLU, M-RoPE (mrope_section, 3 axes).
  TextConfig text;
  Qwen2VisionConfig vision;                ///< the ViT and its patch merger
  int64_t image_token_id = 151655;         ///< <|image_pad|>, expanded to an image's N_v visual tokens
  int64_t video_token_id = 151656;         ///< <|video_pad|> (videos are not supported)
  int64_t vision_start_token_id = 151652;  ///< <|vision_start|>, right before an image's tokens
  int64_t vision_end_token_id = 151653;    ///< <|vision_end|>, right after them

  /// "Qwen2VLForConditionalGeneration" or "Qwen2_5_VLForConditionalGeneration".
  std::string architecture() const;
  /// Checks every field: the decoder's (validate_text_config, three M-RoPE sections), the tower's, and that
  /// the merger's output width is the decoder's hidden_size. @throws ConfigError naming the field.
  void validate() const;
  bool operator==(const Qwen2VlConfig&) const = default;
};

/// Parses a transformers config.json object (model_type "qwen2_vl" or "qwen2_5_vl"; the decoder's fields from
/// "text_config" when present, else from the top level). @throws ConfigError for another model_type, a
/// missing or wrong-typed field (naming it), a rope_scaling without mrope_section.
Qwen2VlConfig qwen2_vl_config_from_json(const nlohmann::json& j);

/// Serialises to the published config.json form (decoder fields at the top level, model_type and
/// architectures of the variant); round-trips through qwen2_vl_config_from_json.
nlohmann::json qwen2_vl_config_to_json(const Qwen2VlConfig& cfg);

}  // namespace vispco
