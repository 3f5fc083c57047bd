// Parsing, validation and serialisation of the LLaVA config (transformers LlavaConfig / CLIPVisionConfig /
// LlamaConfig field names and defaults).
#include "model/llava/config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"
#include "model/llava/gguf_llava.h"
#include "model/model_source.h"

namespace vispco {
namespace {

using nlohmann::json;

// VisionConfig's keys in config.json.
const JsonFields<VisionConfig>& vision_fields() {
  using C = VisionConfig;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<VisionConfig> fields("vision_config", {
      {"hidden_size", &C::hidden_size}, {"intermediate_size", &C::intermediate_size},
      {"num_hidden_layers", &C::num_hidden_layers}, {"num_attention_heads", &C::num_attention_heads},
      {"image_size", &C::image_size}, {"patch_size", &C::patch_size}, {"num_channels", &C::num_channels},
      {"hidden_act", &C::hidden_act}, {"layer_norm_eps", &C::layer_norm_eps}});
  // clang-format on
  return fields;
}

// LlavaConfig's own keys in config.json (image_token_id is transformers ≥ 4.47's name of image_token_index;
// pad_token_id is written only when set).
const JsonFields<LlavaConfig>& llava_fields() {
  using C = LlavaConfig;
  auto id = [](const nlohmann::json& v) { return v.get<int64_t>(); };
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<LlavaConfig> fields("config", {
      {"image_token_index", &C::image_token_index},
      {"image_token_id", [id](const json& v, C& c) { c.image_token_index = id(v); }, {}},
      {"pad_token_id", [id](const json& v, C& c) { c.pad_token_id = id(v); },
       [](const C& c, json& j, const std::string& k) { if (c.pad_token_id >= 0) j[k] = c.pad_token_id; }},
      {"projector_hidden_act", &C::projector_hidden_act}, {"vision_feature_layer", &C::vision_feature_layer},
      {"vision_feature_select_strategy", &C::vision_feature_select_strategy},
      {"multimodal_projector_bias", &C::projector_bias},
      {"tie_word_embeddings", [](const json& v, C& c) { c.text.tie_word_embeddings = v.get<bool>(); },
       [](const C& c, json& j, const std::string& k) { j[k] = c.text.tie_word_embeddings; }}});
  // clang-format on
  return fields;
}

VisionConfig vision_from_json(const json& j) {
  VisionConfig v;
  if (j.contains("model_type") && j["model_type"] != "clip_vision_model")
    throw ConfigError("vision_config.model_type " + j["model_type"].dump() +
                      " is not supported (supported: clip_vision_model)");
  vision_fields().read_known(j, v, "vision_config");
  return v;
}

}  // namespace

VisionConfig clip_vit_l14_336() {
  VisionConfig v;
  v.hidden_size = 1024;
  v.intermediate_size = 4096;
  v.num_hidden_layers = 24;
  v.num_attention_heads = 16;
  v.image_size = 336;
  v.patch_size = 14;
  return v;
}

int64_t LlavaConfig::n_visual_tokens() const {
  const int64_t g = vision.grid();
  return g * g + (vision_feature_select_strategy == "full" ? 1 : 0);
}

int64_t LlavaConfig::n_vision_layers_used() const {
  // hidden_states[0] is the embedding output, hidden_states[i] the output of layer i (HF convention).
  const int64_t n = vision.num_hidden_layers;
  return vision_feature_layer >= 0 ? vision_feature_layer : n + 1 + vision_feature_layer;
}

void LlavaConfig::validate() const {
  const auto& v = vision;
  require_positive("vision_config", {{"hidden_size", v.hidden_size},
                                     {"intermediate_size", v.intermediate_size},
                                     {"num_hidden_layers", v.num_hidden_layers},
                                     {"num_attention_heads", v.num_attention_heads},
                                     {"image_size", v.image_size},
                                     {"patch_size", v.patch_size}});
  require_config(v.num_channels == 3,
                 "vision_config.num_channels must be 3 (got " + std::to_string(v.num_channels) + ")");
  require_config(v.hidden_size % v.num_attention_heads == 0,
                 "vision_config.hidden_size " + std::to_string(v.hidden_size) +
                     " is not divisible by num_attention_heads " + std::to_string(v.num_attention_heads));
  require_config(v.image_size % v.patch_size == 0,
                 "vision_config.image_size " + std::to_string(v.image_size) +
                     " is not a multiple of patch_size " + std::to_string(v.patch_size));
  require_config(v.hidden_act == "quick_gelu" || v.hidden_act == "gelu",
                 "vision_config.hidden_act '" + v.hidden_act + "' (valid: quick_gelu, gelu)");
  validate_text_config(text);
  // image_token_index may lie outside the embedding table (LLaVA's −200, a GGUF vocabulary's n_vocab): the
  // prompt placeholder is replaced by the visual tokens before the lookup.
  require_config(projector_hidden_act == "gelu" || projector_hidden_act == "quick_gelu",
                 "projector_hidden_act '" + projector_hidden_act + "' (valid: gelu, quick_gelu)");
  const int64_t used = n_vision_layers_used();
  require_config(used >= 0 && used <= v.num_hidden_layers,
                 "vision_feature_layer " + std::to_string(vision_feature_layer) + " is outside the tower's " +
                     std::to_string(v.num_hidden_layers) + " layers");
  require_config(
      vision_feature_select_strategy == "default" || vision_feature_select_strategy == "full",
      "vision_feature_select_strategy '" + vision_feature_select_strategy + "' (valid: default, full)");
}

LlavaConfig llava_config_from_json(const json& j) {
  if (!j.is_object()) throw ConfigError("config.json is not a JSON object");
  const std::string model_type = j.value("model_type", "");
  if (model_type != "llava") {
    std::string arch = j.contains("architectures") ? j["architectures"].dump() : "none";
    throw ConfigError("unsupported model_type '" + model_type + "' (architectures " + arch +
                      "); supported: llava (LlavaForConditionalGeneration)");
  }
  LlavaConfig c;
  if (j.contains("vision_config")) c.vision = vision_from_json(j["vision_config"]);
  if (j.contains("text_config")) c.text = text_config_from_json(j["text_config"]);
  if (j.contains("vision_feature_layer") && j["vision_feature_layer"].is_array())
    throw ConfigError("vision_feature_layer as a list is not supported (got " +
                      j["vision_feature_layer"].dump() + ")");
  llava_fields().read_known(j, c, "config");
  return c;
}

json llava_config_to_json(const LlavaConfig& c) {
  json vj = vision_fields().write(c.vision);
  vj["model_type"] = "clip_vision_model";
  const json tj = text_config_to_json(c.text);
  json j = llava_fields().write(c);
  j["model_type"] = "llava";
  j["architectures"] = {"LlavaForConditionalGeneration"};
  j["vision_config"] = vj;
  j["text_config"] = tj;
  return j;
}

LlavaConfig load_llava_config(const std::string& dir) {
  if (names_gguf(dir) || std::filesystem::is_directory(dir)) {
    const ModelSource src = resolve_model_source(dir);
    if (src.is_gguf()) return gguf_llava_config(src);
  }
  if (!std::filesystem::is_directory(dir)) throw IoError("model folder '" + dir + "' does not exist");
  const auto path = std::filesystem::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path.string() + " (is '" + dir + "' a model folder?)");
  const json j = parse_json(in, path.string());
  LlavaConfig c;
  try {
    c = llava_config_from_json(j);
    c.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(path.string() + ": " + e.what());
  }
  return c;
}

}  // namespace vispco
