// Parsing, validation and serialisation of the Qwen2-VL / Qwen2.5-VL vision config (transformers v4.55
// Qwen2VLVisionConfig and Qwen2_5_VLVisionConfig: class defaults, published field names).
#include "model/qwen2_vl/vision_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/errors.h"
#include "model/qwen2_vl/read_field.h"
#include "model/text_config.h"

namespace vispco {

namespace {

using nlohmann::json;

using qwen2_vl_detail::read_field;

// The published "mlp_ratio" for an MLP width: an integer when it divides, else the smallest double r with
// int(embed_dim · r) == width (transformers truncates the product).
json mlp_ratio_of(int64_t embed_dim, int64_t width) {
  if (embed_dim <= 0) return 0;  // an invalid config, written as it is
  if (width % embed_dim == 0) return width / embed_dim;
  double r = double(width) / double(embed_dim);
  while (static_cast<int64_t>(double(embed_dim) * r) < width) r = std::nextafter(r, 2.0 * r + 1.0);
  return r;
}

}  // namespace

bool Qwen2VisionConfig::full_attention_block(int64_t i) const {
  if (!windowed_rms_swiglu()) return true;
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), i) !=
         fullatt_block_indexes.end();
}

void Qwen2VisionConfig::validate(const std::string& w) const {
  const bool q25 = windowed_rms_swiglu();
  require_positive(w, {{"depth", depth},
                       {q25 ? "hidden_size" : "embed_dim", embed_dim},
                       {"num_heads", num_heads},
                       {q25 ? "intermediate_size" : "embed_dim·mlp_ratio", intermediate_size},
                       {"in_channels", in_channels},
                       {"patch_size", patch_size},
                       {"temporal_patch_size", temporal_patch_size},
                       {"spatial_merge_size", spatial_merge_size},
                       {q25 ? "out_hidden_size" : "hidden_size", out_hidden_size}});
  const char* width_key = q25 ? "hidden_size" : "embed_dim";
  require_config(embed_dim % num_heads == 0, w + "." + width_key + " " + std::to_string(embed_dim) +
                                                 " is not a multiple of num_heads " +
                                                 std::to_string(num_heads));
  require_config(head_dim() % 4 == 0, w + ": head dim " + std::to_string(head_dim()) + " (" + width_key +
                                          " / num_heads) must be a multiple of 4 (2-D rotary: a quarter of "
                                          "the head for rows, a quarter for columns)");
  require_config(hidden_act == "silu" || hidden_act == "gelu" || hidden_act == "gelu_pytorch_tanh" ||
                     hidden_act == "quick_gelu",
                 w + ".hidden_act '" + hidden_act + "' (valid: silu, gelu, gelu_pytorch_tanh, quick_gelu)");
  require_config(eps > 0, w + ": norm eps must be > 0 (got " + std::to_string(eps) + ")");
  if (q25) {
    const int64_t unit = patch_size * spatial_merge_size;
    require_config(
        window_size > 0 && window_size % unit == 0,
        w + ".window_size " + std::to_string(window_size) +
            " must be a positive multiple of patch_size · spatial_merge_size = " + std::to_string(unit));
    for (const auto i : fullatt_block_indexes)
      require_config(i >= 0 && i < depth, w + ".fullatt_block_indexes holds " + std::to_string(i) +
                                              ", outside [0, depth = " + std::to_string(depth) + ")");
    require_config(tokens_per_second >= 0,
                   w + ".tokens_per_second must be ≥ 0 (got " + std::to_string(tokens_per_second) + ")");
  } else {
    require_config(
        window_size == 0 && fullatt_block_indexes.empty() && tokens_per_second == 0,
        w + ": window_size, fullatt_block_indexes and tokens_per_second are Qwen2.5-VL's (Qwen2-VL "
            "attends over the whole image in every block): leave them 0 / empty");
  }
}

Qwen2VisionConfig qwen25_vision_defaults() {
  Qwen2VisionConfig c;
  c.arch = QwenVisionArch::kQwen25VL;
  c.depth = 32;
  c.embed_dim = 3584;
  c.num_heads = 16;
  c.intermediate_size = 3420;
  c.out_hidden_size = 3584;
  c.hidden_act = "silu";
  c.window_size = 112;
  c.fullatt_block_indexes = {7, 15, 23, 31};
  c.tokens_per_second = 4;
  return c;
}

Qwen2VisionConfig qwen2_vision_config_from_json(const json& j, bool qwen25, const std::string& w) {
  if (!j.is_object()) throw ConfigError(w + " must be a JSON object (got " + j.dump().substr(0, 80) + ")");
  Qwen2VisionConfig c = qwen25 ? qwen25_vision_defaults() : Qwen2VisionConfig{};
  read_field(j, "depth", w, c.depth);
  read_field(j, "num_heads", w, c.num_heads);
  if (!read_field(j, "in_channels", w, c.in_channels)) read_field(j, "in_chans", w, c.in_channels);
  read_field(j, "patch_size", w, c.patch_size);
  read_field(j, "temporal_patch_size", w, c.temporal_patch_size);
  read_field(j, "spatial_merge_size", w, c.spatial_merge_size);
  read_field(j, "hidden_act", w, c.hidden_act);
  if (qwen25) {
    read_field(j, "hidden_size", w, c.embed_dim);
    read_field(j, "intermediate_size", w, c.intermediate_size);
    read_field(j, "out_hidden_size", w, c.out_hidden_size);
    read_field(j, "window_size", w, c.window_size);
    read_field(j, "fullatt_block_indexes", w, c.fullatt_block_indexes);
    read_field(j, "tokens_per_second", w, c.tokens_per_second);
  } else {
    read_field(j, "embed_dim", w, c.embed_dim);
    read_field(j, "hidden_size", w, c.out_hidden_size);
    double mlp_ratio = 4.0;
    auto it = j.find("mlp_ratio");
    if (it != j.end() && !it->is_null()) {
      if (!it->is_number())
        throw ConfigError(w + ".mlp_ratio has the wrong type (got " + it->dump() + "; expected a number)");
      mlp_ratio = it->get<double>();
    }
    const double width = double(c.embed_dim) * mlp_ratio;  // transformers: int(embed_dim * mlp_ratio)
    if (!(width >= 1.0 && width < double(std::numeric_limits<int32_t>::max())))
      throw ConfigError("invalid config: " + w + ".mlp_ratio " + std::to_string(mlp_ratio) +
                        " gives an MLP width of " + std::to_string(width) + " (embed_dim " +
                        std::to_string(c.embed_dim) + ")");
    c.intermediate_size = static_cast<int64_t>(width);
  }
  c.validate(w);
  return c;
}

json to_json(const Qwen2VisionConfig& c) {
  json j = {{"depth", c.depth},
            {"num_heads", c.num_heads},
            {"in_chans", c.in_channels},
            {"in_channels", c.in_channels},
            {"hidden_act", c.hidden_act},
            {"patch_size", c.patch_size},
            {"spatial_patch_size", c.patch_size},
            {"spatial_merge_size", c.spatial_merge_size},
            {"temporal_patch_size", c.temporal_patch_size}};
  if (c.windowed_rms_swiglu()) {
    j["hidden_size"] = c.embed_dim;
    j["intermediate_size"] = c.intermediate_size;
    j["out_hidden_size"] = c.out_hidden_size;
    j["window_size"] = c.window_size;
    j["fullatt_block_indexes"] = c.fullatt_block_indexes;
    j["tokens_per_second"] = c.tokens_per_second;
  } else {
    j["embed_dim"] = c.embed_dim;
    j["mlp_ratio"] = mlp_ratio_of(c.embed_dim, c.intermediate_size);
    j["hidden_size"] = c.out_hidden_size;
  }
  return j;
}

}  // namespace vispco
