// Model configuration in the Hugging Face LLaVA-NeXT form (transformers LlavaNextConfig,
// models/llava_next/configuration_llava_next.py): LLaVA-1.5's fields (CLIP vision config, Llama text config,
// projector, feature layer and select strategy; model/llava/config.h) plus image_grid_pinpoints, the
// resolutions AnyRes may tile an image at. The checkpoint adds `image_newline` [D] at its top level.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "model/llava/config.h"

namespace vispco {

/// One AnyRes resolution, pixels, in transformers' (height, width) order.
struct Resolution {
  int64_t height = 0;  ///< pixels, > 0
  int64_t width = 0;   ///< pixels, > 0
  bool operator==(const Resolution&) const = default;
};

/// LLaVA-NeXT (transformers LlavaNextConfig). Defaults are LlavaNextConfig's.
struct LlavaNextConfig {
  /// The fields LLaVA-NeXT shares with LLaVA-1.5. Without a vision_config in config.json it is CLIP
  /// ViT-L/14 at 336 px, as transformers' default.
  LlavaConfig llava = default_llava();
  /// image_grid_pinpoints, (height, width) pixels: each a positive multiple of the tower's image_size
  /// (the tiles are image_size squares); at least one.
  std::vector<Resolution> image_grid_pinpoints = {
      {336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}};

  /// Patches per side of one tile (image_size / patch_size); a tile makes grid()² features.
  int64_t grid() const { return llava.vision.grid(); }
  /// Checks every field (LlavaConfig::validate, the pinpoints, and vision_feature_select_strategy "default":
  /// the tile features are laid on a grid, which a [CLS] row would break).
  /// @throws ConfigError naming the field, its value and the valid range.
  void validate() const;
  bool operator==(const LlavaNextConfig&) const = default;

  /// LlavaConfig with transformers LlavaNextConfig's default vision tower (CLIP ViT-L/14-336).
  static LlavaConfig default_llava();
};

/// Parses a transformers config.json object (model_type "llava_next"). Missing fields take LlavaNextConfig's
/// defaults. @throws ConfigError for another model_type, a list vision_feature_layer, or a field of the
/// wrong type (naming it).
LlavaNextConfig llava_next_config_from_json(const nlohmann::json& j);
/// Serialises to the transformers config.json form (architectures LlavaNextForConditionalGeneration);
/// round-trips through llava_next_config_from_json.
nlohmann::json llava_next_config_to_json(const LlavaNextConfig& cfg);

}  // namespace vispco
