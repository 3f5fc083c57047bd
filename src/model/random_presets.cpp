// The joined preset table of `vispco init-random` (see random_presets.h).
#include "model/random_presets.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/named_table.h"
#include "model/llava/presets.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/llava_next.h"
#include "model/llava_next/llava_next_shape.h"
#include "model/llava_next/presets.h"
#include "model/qwen2_vl/presets.h"
#include "model/qwen2_vl/qwen2_vl.h"
#include "model/vlm.h"

namespace vispco {

namespace {

std::string write_llava(const LlavaConfig& cfg, const std::string& dir, uint64_t seed,
                        c10::ScalarType dtype) {
  cfg.validate();
  write_random_llava(dir, cfg, seed, dtype);
  return "wrote random LLaVA (" + std::to_string(cfg.text.num_hidden_layers) +
         " decoder layers, N_v = " + std::to_string(cfg.n_visual_tokens()) + ") to " + dir;
}

std::string write_next(const LlavaNextConfig& cfg, const std::string& dir, uint64_t seed,
                       c10::ScalarType dtype) {
  cfg.validate();
  write_random_llava_next(dir, cfg, seed, dtype);
  return "wrote random LLaVA-NeXT (" + std::to_string(cfg.llava.text.num_hidden_layers) +
         " decoder layers, N_v ≤ " + std::to_string(anyres_largest_layout(cfg).n_tokens) + ") to " + dir;
}

std::string write_qwen(const Qwen2VlConfig& cfg, const std::string& dir, uint64_t seed,
                       c10::ScalarType dtype) {
  write_random_qwen2_vl(dir, cfg, seed, dtype);
  return "wrote random " + std::string(cfg.qwen25 ? "Qwen2.5-VL" : "Qwen2-VL") + " (" +
         std::to_string(cfg.text.num_hidden_layers) + " decoder layers, " + std::to_string(cfg.vision.depth) +
         " vision blocks; N_v per image from its size) to " + dir;
}

LlavaNextConfig truncated_next(LlavaNextConfig cfg, int64_t n_layers) {
  cfg.llava = truncated_config(cfg.llava, n_layers);
  return cfg;
}

// Decoder to min(N, L) layers, tower to min(N, depth) blocks; Qwen2.5-VL's full-attention blocks past the
// cut are dropped (the last block built stays windowed unless it was full).
Qwen2VlConfig truncated_qwen(Qwen2VlConfig cfg, int64_t n_layers) {
  if (n_layers < 0)
    throw InvalidArgument("layers must be ≥ 0, 0 = full depth (got " + std::to_string(n_layers) + ")");
  if (n_layers == 0) return cfg;
  cfg.text.num_hidden_layers = std::min(n_layers, cfg.text.num_hidden_layers);
  cfg.vision.depth = std::min(n_layers, cfg.vision.depth);
  auto& full = cfg.vision.fullatt_block_indexes;
  full.erase(std::remove_if(full.begin(), full.end(), [&](int64_t i) { return i >= cfg.vision.depth; }),
             full.end());
  return cfg;
}

VisionLanguageModel build_next(const LlavaNextConfig& cfg, uint64_t seed, const RunContext& ctx) {
  auto net = random_llava_next_net(cfg, seed, ctx.dtype);
  net->to(ctx.device);
  return VisionLanguageModel(std::make_shared<LlavaNextModel>(cfg, net, io::ImagePreprocessConfig{}),
                             io::Tokenizer{}, ctx);
}

VisionLanguageModel build_qwen(const Qwen2VlConfig& cfg, uint64_t seed, const RunContext& ctx) {
  auto net = random_qwen2_vl_net(cfg, seed, ctx.dtype);
  net->to(ctx.device);
  return VisionLanguageModel(std::make_shared<Qwen2VlModel>(cfg, net, QwenImageProcessorConfig{}),
                             io::Tokenizer{}, ctx);
}

}  // namespace

const std::vector<RandomPreset>& random_presets() {
  static const std::vector<RandomPreset> table = [] {
    std::vector<RandomPreset> t;
    for (const auto& p : model_presets())
      t.push_back({p.name, "LLaVA-1.5", p.description,
                   [c = p.config](const std::string& d, uint64_t s, c10::ScalarType x) {
                     return write_llava(c, d, s, x);
                   },
                   [n = p.name](int64_t layers) { return preset_shape(n, layers); },
                   [n = p.name](int64_t layers, uint64_t s, const RunContext& ctx) {
                     return random_preset_model(n, layers, s, ctx);
                   }});
    for (const auto& p : llava_next_presets())
      t.push_back({p.name, "LLaVA-NeXT", p.description,
                   [c = p.config](const std::string& d, uint64_t s, c10::ScalarType x) {
                     return write_next(c, d, s, x);
                   },
                   [c = p.config](int64_t layers) { return llava_next_shape(truncated_next(c, layers)); },
                   [c = p.config](int64_t layers, uint64_t s, const RunContext& ctx) {
                     return build_next(truncated_next(c, layers), s, ctx);
                   }});
    for (const auto& p : qwen2_vl_presets())
      t.push_back({p.name, p.config.qwen25 ? "Qwen2.5-VL" : "Qwen2-VL", p.description,
                   [c = p.config](const std::string& d, uint64_t s, c10::ScalarType x) {
                     return write_qwen(c, d, s, x);
                   },
                   [c = p.config](int64_t layers) { return qwen2_vl_shape(truncated_qwen(c, layers)); },
                   [c = p.config](int64_t layers, uint64_t s, const RunContext& ctx) {
                     return build_qwen(truncated_qwen(c, layers), s, ctx);
                   }});
    return t;
  }();
  return table;
}

const RandomPreset& find_random_preset(const std::string& name) {
  return find_named(random_presets(), name, "preset");
}

std::string write_random_from_config(const nlohmann::json& j, const std::string& dir, uint64_t seed,
                                     c10::ScalarType dtype) {
  const std::string type = j.is_object() ? j.value("model_type", "") : "";
  if (type == "llava_next") return write_next(llava_next_config_from_json(j), dir, seed, dtype);
  if (type == "qwen2_vl" || type == "qwen2_5_vl")
    return write_qwen(qwen2_vl_config_from_json(j), dir, seed, dtype);
  // A training recipe (configs/*.json) holds the model config under "model".
  return write_llava(llava_config_from_json(j.contains("model") && j["model"].is_object() ? j["model"] : j),
                     dir, seed, dtype);
}

}  // namespace vispco
