// Parsing, validation and serialisation of the LLaVA config (transformers LlavaConfig / CLIPVisionConfig /
// LlamaConfig field names and defaults).
#include "model/config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"
#include "model/gguf_llava.h"
#include "model/model_source.h"

namespace vispco {
namespace {

using nlohmann::json;

// Reads j[key] into out when present and not null; a wrong JSON type names the field.
template <typename T>
void read(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    throw ConfigError(where + "." + key + " has the wrong type (got " + it->dump() + ")");
  }
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw ConfigError("invalid config: " + msg);
}

VisionConfig vision_from_json(const json& j) {
  VisionConfig v;
  const std::string w = "vision_config";
  if (j.contains("model_type") && j["model_type"] != "clip_vision_model")
    throw ConfigError("vision_config.model_type " + j["model_type"].dump() +
                      " is not supported (supported: clip_vision_model)");
  read(j, "hidden_size", v.hidden_size, w);
  read(j, "intermediate_size", v.intermediate_size, w);
  read(j, "num_hidden_layers", v.num_hidden_layers, w);
  read(j, "num_attention_heads", v.num_attention_heads, w);
  read(j, "image_size", v.image_size, w);
  read(j, "patch_size", v.patch_size, w);
  read(j, "num_channels", v.num_channels, w);
  read(j, "hidden_act", v.hidden_act, w);
  read(j, "layer_norm_eps", v.layer_norm_eps, w);
  return v;
}

TextConfig text_from_json(const json& j) {
  TextConfig t;
  const std::string w = "text_config";
  if (j.contains("model_type") && j["model_type"] != "llama")
    throw ConfigError("text_config.model_type " + j["model_type"].dump() +
                      " is not supported (supported: llama)");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw ConfigError("text_config.rope_scaling is not supported (got " + j["rope_scaling"].dump() + ")");
  read(j, "vocab_size", t.vocab_size, w);
  read(j, "hidden_size", t.hidden_size, w);
  read(j, "intermediate_size", t.intermediate_size, w);
  read(j, "num_hidden_layers", t.num_hidden_layers, w);
  read(j, "num_attention_heads", t.num_attention_heads, w);
  read(j, "num_key_value_heads", t.num_key_value_heads, w);
  if (t.num_key_value_heads <= 0) t.num_key_value_heads = t.num_attention_heads;  // HF: None means MHA
  read(j, "head_dim", t.head_dim, w);
  read(j, "max_position_embeddings", t.max_position_embeddings, w);
  read(j, "rms_norm_eps", t.rms_norm_eps, w);
  read(j, "rope_theta", t.rope_theta, w);
  read(j, "tie_word_embeddings", t.tie_word_embeddings, w);
  read(j, "attention_bias", t.attention_bias, w);
  read(j, "hidden_act", t.hidden_act, w);
  read(j, "bos_token_id", t.bos_token_id, w);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty())
    t.eos_token_id = j["eos_token_id"][0].get<int64_t>();
  else
    read(j, "eos_token_id", t.eos_token_id, w);
  return t;
}

}  // namespace

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
  const auto& t = text;
  auto positive = [](const char* name, int64_t x) {
    require(x > 0, std::string(name) + " must be > 0 (got " + std::to_string(x) + ")");
  };
  positive("vision_config.hidden_size", v.hidden_size);
  positive("vision_config.intermediate_size", v.intermediate_size);
  positive("vision_config.num_hidden_layers", v.num_hidden_layers);
  positive("vision_config.num_attention_heads", v.num_attention_heads);
  positive("vision_config.image_size", v.image_size);
  positive("vision_config.patch_size", v.patch_size);
  require(v.num_channels == 3,
          "vision_config.num_channels must be 3 (got " + std::to_string(v.num_channels) + ")");
  require(v.hidden_size % v.num_attention_heads == 0,
          "vision_config.hidden_size " + std::to_string(v.hidden_size) +
              " is not divisible by num_attention_heads " + std::to_string(v.num_attention_heads));
  require(v.image_size % v.patch_size == 0, "vision_config.image_size " + std::to_string(v.image_size) +
                                                " is not a multiple of patch_size " +
                                                std::to_string(v.patch_size));
  require(v.hidden_act == "quick_gelu" || v.hidden_act == "gelu",
          "vision_config.hidden_act '" + v.hidden_act + "' (valid: quick_gelu, gelu)");
  positive("text_config.vocab_size", t.vocab_size);
  positive("text_config.hidden_size", t.hidden_size);
  positive("text_config.intermediate_size", t.intermediate_size);
  positive("text_config.num_hidden_layers", t.num_hidden_layers);
  positive("text_config.num_attention_heads", t.num_attention_heads);
  positive("text_config.max_position_embeddings", t.max_position_embeddings);
  require(t.num_attention_heads % t.n_kv_heads() == 0,
          "text_config.num_attention_heads " + std::to_string(t.num_attention_heads) +
              " is not a multiple of num_key_value_heads " + std::to_string(t.n_kv_heads()));
  require(t.head_dim > 0 || t.hidden_size % t.num_attention_heads == 0,
          "text_config.hidden_size is not divisible by num_attention_heads and head_dim is not set");
  require(t.d_head() % 2 == 0, "head dim " + std::to_string(t.d_head()) + " must be even for RoPE");
  require(t.hidden_act == "silu", "text_config.hidden_act '" + t.hidden_act + "' (valid: silu)");
  require(t.rope_theta > 0, "text_config.rope_theta must be > 0");
  // image_token_index may lie outside the embedding table (LLaVA's −200, a GGUF vocabulary's n_vocab): the
  // prompt placeholder is replaced by the visual tokens before the lookup.
  require(projector_hidden_act == "gelu" || projector_hidden_act == "quick_gelu",
          "projector_hidden_act '" + projector_hidden_act + "' (valid: gelu, quick_gelu)");
  const int64_t used = n_vision_layers_used();
  require(used >= 0 && used <= v.num_hidden_layers,
          "vision_feature_layer " + std::to_string(vision_feature_layer) + " is outside the tower's " +
              std::to_string(v.num_hidden_layers) + " layers");
  require(vision_feature_select_strategy == "default" || vision_feature_select_strategy == "full",
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
  if (j.contains("text_config")) c.text = text_from_json(j["text_config"]);
  read(j, "image_token_index", c.image_token_index, "config");
  read(j, "image_token_id", c.image_token_index, "config");  // transformers ≥ 4.47 name
  read(j, "pad_token_id", c.pad_token_id, "config");
  read(j, "projector_hidden_act", c.projector_hidden_act, "config");
  if (j.contains("vision_feature_layer") && j["vision_feature_layer"].is_array())
    throw ConfigError("vision_feature_layer as a list is not supported (got " +
                      j["vision_feature_layer"].dump() + ")");
  read(j, "vision_feature_layer", c.vision_feature_layer, "config");
  read(j, "vision_feature_select_strategy", c.vision_feature_select_strategy, "config");
  read(j, "multimodal_projector_bias", c.projector_bias, "config");
  read(j, "tie_word_embeddings", c.text.tie_word_embeddings, "config");
  return c;
}

json llava_config_to_json(const LlavaConfig& c) {
  const auto& v = c.vision;
  const auto& t = c.text;
  json vj = {{"model_type", "clip_vision_model"},
             {"hidden_size", v.hidden_size},
             {"intermediate_size", v.intermediate_size},
             {"num_hidden_layers", v.num_hidden_layers},
             {"num_attention_heads", v.num_attention_heads},
             {"image_size", v.image_size},
             {"patch_size", v.patch_size},
             {"num_channels", v.num_channels},
             {"hidden_act", v.hidden_act},
             {"layer_norm_eps", v.layer_norm_eps}};
  json tj = {{"model_type", "llama"},
             {"architectures", {"LlamaForCausalLM"}},
             {"vocab_size", t.vocab_size},
             {"hidden_size", t.hidden_size},
             {"intermediate_size", t.intermediate_size},
             {"num_hidden_layers", t.num_hidden_layers},
             {"num_attention_heads", t.num_attention_heads},
             {"num_key_value_heads", t.n_kv_heads()},
             {"max_position_embeddings", t.max_position_embeddings},
             {"rms_norm_eps", t.rms_norm_eps},
             {"rope_theta", t.rope_theta},
             {"tie_word_embeddings", t.tie_word_embeddings},
             {"attention_bias", t.attention_bias},
             {"hidden_act", t.hidden_act},
             {"bos_token_id", t.bos_token_id},
             {"eos_token_id", t.eos_token_id}};
  if (t.head_dim > 0) tj["head_dim"] = t.head_dim;
  json j = {{"model_type", "llava"},
            {"architectures", {"LlavaForConditionalGeneration"}},
            {"image_token_index", c.image_token_index},
            {"projector_hidden_act", c.projector_hidden_act},
            {"vision_feature_layer", c.vision_feature_layer},
            {"vision_feature_select_strategy", c.vision_feature_select_strategy},
            {"multimodal_projector_bias", c.projector_bias},
            {"tie_word_embeddings", t.tie_word_embeddings},
            {"vision_config", vj},
            {"text_config", tj}};
  if (c.pad_token_id >= 0) j["pad_token_id"] = c.pad_token_id;
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
