// Parsing, validation and serialisation of the Qwen2-VL / Qwen2.5-VL config (see config.h). Field names from
// the published config.json of Qwen/Qwen2-VL-7B-Instruct and Qwen/Qwen2.5-VL-3B-Instruct.
#include "model/qwen2_vl/config.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco {

namespace {

using nlohmann::json;

constexpr const char* kIdFields[] = {"image_token_id", "video_token_id", "vision_start_token_id",
                                     "vision_end_token_id"};

// The member of `c` named `name` (one of kIdFields); C is Qwen2VlConfig or const Qwen2VlConfig.
template <class C>
auto* id_field(C& c, const std::string& name) {
  if (name == "image_token_id") return &c.image_token_id;
  if (name == "video_token_id") return &c.video_token_id;
  if (name == "vision_start_token_id") return &c.vision_start_token_id;
  return &c.vision_end_token_id;
}

}  // namespace

std::string Qwen2VlConfig::architecture() const {
  return qwen25 ? "Qwen2_5_VLForConditionalGeneration" : "Qwen2VLForConditionalGeneration";
}

void Qwen2VlConfig::validate() const {
  validate_text_config(text, "text_config");
  require_config(text.mrope_section.size() == 3,
                 "rope_scaling.mrope_section must have 3 sections (temporal, height, width), got " +
                     std::to_string(text.mrope_section.size()));
  vision.validate("vision_config");
  require_config(vision.out_hidden_size == text.hidden_size,
                 "the vision merger's output width " + std::to_string(vision.out_hidden_size) +
                     " is not the decoder's hidden_size " + std::to_string(text.hidden_size));
  for (const char* f : kIdFields) {
    const int64_t id = *id_field(*this, f);
    require_config(id >= 0, std::string(f) + " must be ≥ 0 (got " + std::to_string(id) + ")");
  }
}

Qwen2VlConfig qwen2_vl_config_from_json(const json& j) {
  if (!j.is_object()) throw ConfigError("config.json is not a JSON object");
  const std::string model_type = j.value("model_type", "");
  if (model_type != "qwen2_vl" && model_type != "qwen2_5_vl") {
    const std::string arch = j.contains("architectures") ? j["architectures"].dump() : "none";
    throw ConfigError("unsupported model_type '" + model_type + "' (architectures " + arch +
                      "); supported: qwen2_vl, qwen2_5_vl");
  }
  Qwen2VlConfig c;
  c.qwen25 = model_type == "qwen2_5_vl";
  try {
    const bool nested = j.contains("text_config") && j["text_config"].is_object();
    json text = nested ? j["text_config"] : j;
    for (const char* k : {"model_type", "vision_config", "text_config", "architectures"}) text.erase(k);
    if (!text.contains("rope_scaling") && j.contains("rope_scaling"))
      text["rope_scaling"] = j["rope_scaling"];
    if (text.value("use_sliding_window", false))
      throw ConfigError(
          "use_sliding_window true is not supported (every published Qwen2-VL config has false)");
    c.text = text_config_from_json(text, nested ? "text_config" : "config");
    c.text.qkv_bias = true;  // Qwen2 attention: q/k/v biases, no o_proj bias
    if (!j.contains("vision_config") || !j["vision_config"].is_object())
      throw ConfigError("config.json has no vision_config object");
    c.vision = qwen2_vision_config_from_json(j["vision_config"], c.qwen25, "vision_config");
    for (const char* f : kIdFields) {
      const json& src = j.contains(f)                            ? j
                        : nested && j["text_config"].contains(f) ? j["text_config"]
                                                                 : json();
      if (src.is_null()) continue;
      if (!src[f].is_number_integer())
        throw ConfigError(std::string(f) + " must be an integer (got " + src[f].dump() + ")");
      *id_field(c, f) = src[f].get<int64_t>();
    }
  } catch (const json::exception& e) {
    throw ConfigError(std::string("config.json: ") + e.what());
  }
  return c;
}

json qwen2_vl_config_to_json(const Qwen2VlConfig& cfg) {
  json j = text_config_to_json(cfg.text);
  j["model_type"] = cfg.qwen25 ? "qwen2_5_vl" : "qwen2_vl";
  j["architectures"] = {cfg.architecture()};
  j["vision_config"] = to_json(cfg.vision);
  for (const char* f : kIdFields) j[f] = *id_field(cfg, f);
  return j;
}

}  // namespace vispco
