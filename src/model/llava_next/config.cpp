// Parsing, validation and serialisation of the LLaVA-NeXT config: LLaVA-1.5's fields through
// model/llava/config.h, plus image_grid_pinpoints.
#include "model/llava_next/config.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"
#include "model/text_config.h"

namespace vispco {

namespace {

using nlohmann::json;

std::vector<Resolution> pinpoints_from_json(const json& v) {
  auto bad = [&] {
    return ConfigError("image_grid_pinpoints must be a list of [height, width] pairs of integers (got " +
                       v.dump() + ")");
  };
  if (!v.is_array()) throw bad();
  std::vector<Resolution> out;
  for (const auto& p : v) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer()) throw bad();
    out.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
  }
  return out;
}

}  // namespace

LlavaConfig LlavaNextConfig::default_llava() {
  LlavaConfig c;
  c.vision = clip_vit_l14_336();
  return c;
}

void LlavaNextConfig::validate() const {
  llava.validate();
  require_config(llava.vision_feature_select_strategy == "default",
                 "vision_feature_select_strategy '" + llava.vision_feature_select_strategy +
                     "' (LLaVA-NeXT lays tile features on a grid: valid: default)");
  require_config(!image_grid_pinpoints.empty(), "image_grid_pinpoints is empty");
  const int64_t s = llava.vision.image_size;
  for (const auto& p : image_grid_pinpoints)
    require_config(p.height > 0 && p.width > 0 && p.height % s == 0 && p.width % s == 0,
                   "image_grid_pinpoints entry [" + std::to_string(p.height) + ", " +
                       std::to_string(p.width) + "] is not a positive multiple of vision_config.image_size " +
                       std::to_string(s) + " on both sides");
}

LlavaNextConfig llava_next_config_from_json(const json& j) {
  if (!j.is_object()) throw ConfigError("config.json is not a JSON object");
  const std::string model_type = j.value("model_type", "");
  if (model_type != "llava_next") {
    const std::string arch = j.contains("architectures") ? j["architectures"].dump() : "none";
    throw ConfigError("unsupported model_type '" + model_type + "' (architectures " + arch +
                      "); supported: llava_next (LlavaNextForConditionalGeneration)");
  }
  // LLaVA-1.5's parser reads the shared fields; the default tower is LlavaNextConfig's when none is given.
  json shared = j;
  shared["model_type"] = "llava";
  shared.erase("image_grid_pinpoints");
  for (const char* k : {"vision_config", "text_config"})
    if (shared.contains(k) && shared[k].is_null()) shared.erase(k);
  LlavaNextConfig c;
  c.llava = llava_config_from_json(shared);
  if (!j.contains("vision_config") || j["vision_config"].is_null()) c.llava.vision = c.default_llava().vision;
  if (j.contains("image_grid_pinpoints") && !j["image_grid_pinpoints"].is_null())
    c.image_grid_pinpoints = pinpoints_from_json(j["image_grid_pinpoints"]);
  return c;
}

json llava_next_config_to_json(const LlavaNextConfig& c) {
  json j = llava_config_to_json(c.llava);
  j["model_type"] = "llava_next";
  j["architectures"] = {"LlavaNextForConditionalGeneration"};
  json pins = json::array();
  for (const auto& p : c.image_grid_pinpoints) pins.push_back({p.height, p.width});
  j["image_grid_pinpoints"] = pins;
  return j;
}

}  // namespace vispco
