// The family registry: built-in rows first (LLaVA-1.5, model/llava/llava.h; LLaVA-NeXT,
// model/llava_next/llava_next.h), then any a test registers.
#include "model/family.h"

#include <ATen/ATen.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_file.h"
#include "model/llava/llava.h"
#include "model/llava_next/llava_next.h"
#include "model/model_source.h"
#include "model/qwen2_vl/qwen2_vl.h"

namespace vispco {

VisualTokens FamilyModel::encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention) {
  if (pixels.empty()) throw InvalidArgument("encode_image_list: no images");
  for (const auto& p : pixels)
    if (!p.sizes().equals(pixels[0].sizes()))
      throw InvalidArgument("encode_image_list: this family takes images of one preprocessed size, got " +
                            std::to_string(p.dim()) + "-d pixels of another size");
  return encode_images(at::stack(pixels, 0), want_cls_attention);
}

std::vector<TokenPanel> FamilyModel::token_panels(int64_t height, int64_t width) const {
  return {square_token_panel(height, width, shape().grid_rows, shape().grid_cols,
                             preprocess_config().pad_to_square)};
}

FlopsSpec FamilyModel::image_flops(int64_t height, int64_t width) const {
  if (height < 1 || width < 1)
    throw InvalidArgument("image size must be positive (got " + std::to_string(width) + "x" +
                          std::to_string(height) + ")");
  return shape().flops;
}

namespace fs = std::filesystem;

namespace {

// A deque: rows never move, so the references family_for_config() hands out stay valid.
std::deque<ModelFamily>& registry() {
  static std::deque<ModelFamily> rows{llava_family(), llava_next_family(), qwen2_vl_family(),
                                      qwen2_5_vl_family()};
  return rows;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::string registered_names() {
  std::string names;
  for (const auto& f : registry()) names += (names.empty() ? "" : ", ") + f.architecture;
  return names;
}

// The family that reads GGUF pairs (the first with a GGUF loader). @throws ConfigError when none does.
const ModelFamily& gguf_family() {
  for (const auto& f : registry())
    if (f.load_gguf && f.gguf_shape) return f;
  throw ConfigError("no registered model family reads GGUF pairs");
}

// config.json of a Hugging Face folder. @throws IoError (no folder, unreadable), FormatError (bad JSON).
nlohmann::json read_config_json(const std::string& dir, std::string& path_out) {
  if (!fs::is_directory(dir)) throw IoError("model folder '" + dir + "' does not exist");
  const auto path = fs::path(dir) / "config.json";
  path_out = path.string();
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path.string() + " (is '" + dir + "' a model folder?)");
  return parse_json(in, path.string());
}

bool is_gguf_source(const std::string& dir) {
  return (names_gguf(dir) || fs::is_directory(dir)) && resolve_model_source(dir).is_gguf();
}

}  // namespace

const std::deque<ModelFamily>& model_families() { return registry(); }

void register_model_family(ModelFamily family) {
  if (family.architecture.empty() || !family.shape || !family.load)
    throw InvalidArgument("register_model_family: a family needs an architecture name, shape() and load()");
  std::lock_guard lock(registry_mutex());
  for (const auto& f : registry())
    if (f.architecture == family.architecture)
      throw InvalidArgument("register_model_family: '" + family.architecture + "' is already registered");
  registry().push_back(std::move(family));
}

const ModelFamily& family_for_config(const nlohmann::json& config, const std::string& where) {
  std::string arch;
  if (config.is_object() && config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string())
    arch = config["architectures"][0].get<std::string>();
  const std::string model_type =
      config.is_object() && config.contains("model_type") && config["model_type"].is_string()
          ? config["model_type"].get<std::string>()
          : "";
  for (const auto& f : registry())
    if (!arch.empty() ? f.architecture == arch : (!f.model_type.empty() && f.model_type == model_type))
      return f;
  throw ConfigError(where + ": unsupported model (architectures " +
                    (arch.empty() ? std::string("none") : "'" + arch + "'") + ", model_type '" + model_type +
                    "'); vispco reads " + registered_names());
}

std::string tuned_plan_of(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "config.json";
  nlohmann::json j;
  try {
    j = read_json_file(path.string(), "model config");
  } catch (const Error&) {
    return "";  // a missing or corrupt config is the model loader's error to report, in its words
  }
  if (j.contains("vispco") && j["vispco"].is_object() && j["vispco"].contains("tuned_for_plan") &&
      j["vispco"]["tuned_for_plan"].is_string())
    return j["vispco"]["tuned_for_plan"].get<std::string>();
  return "";
}

ModelShape load_model_shape(const std::string& dir) {
  if (is_gguf_source(dir)) return gguf_family().gguf_shape(resolve_model_source(dir));
  std::string path;
  const nlohmann::json config = read_config_json(dir, path);
  const ModelFamily& family = family_for_config(config, path);
  try {
    return family.shape(config);
  } catch (const ConfigError& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

LoadedFamilyModel load_family_model(const std::string& dir, const RunContext& ctx) {
  if (is_gguf_source(dir)) return gguf_family().load_gguf(resolve_model_source(dir), ctx);
  std::string path;
  const nlohmann::json config = read_config_json(dir, path);
  return family_for_config(config, path).load(dir, config, ctx);
}

}  // namespace vispco
