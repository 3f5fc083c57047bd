// The LLaVA-NeXT preset table and random-weight model folders.
#include "model/llava_next/presets.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/named_table.h"
#include "model/llava/presets.h"

namespace vispco {

namespace {

LlavaNextConfig tiny_next() {
  LlavaNextConfig c;
  c.llava = find_preset("tiny").config;
  c.image_grid_pinpoints = {{56, 112}, {112, 56}, {112, 112}};
  return c;
}

LlavaNextConfig vicuna_7b() {
  LlavaNextConfig c;
  c.llava = find_preset("llava-1.5-7b").config;  // CLIP ViT-L/336 + Vicuna-7B, as llava-v1.6-vicuna-7b-hf
  return c;
}

}  // namespace

const std::vector<LlavaNextPreset>& llava_next_presets() {
  static const std::vector<LlavaNextPreset> table = {
      {"tiny-next",
       "tests: LLaVA-NeXT of the tiny preset, 56-px tiles, pinpoints 56×112 / 112×56 / 112×112 (N_v ≤ 88)",
       tiny_next()},
      {"llava-v1.6-vicuna-7b", "CLIP ViT-L/336 + Vicuna-7B dimensions, the v1.6 pinpoints (N_v ≤ 2,928)",
       vicuna_7b()},
  };
  return table;
}

const LlavaNextPreset& find_llava_next_preset(const std::string& name) {
  return find_named(llava_next_presets(), name, "LLaVA-NeXT preset");
}

LlavaNextNet random_llava_next_net(const LlavaNextConfig& cfg, uint64_t seed, c10::ScalarType dtype) {
  auto net = random_net<LlavaNextNet>(cfg, seed, dtype);
  at::NoGradGuard no_grad;
  net->image_newline.normal_(0.0, 1.0 / std::sqrt(double(cfg.llava.text.hidden_size)));
  return net;
}

void write_next_preprocessor_config(const std::string& dir, const LlavaNextConfig& cfg) {
  const int64_t s = cfg.llava.vision.image_size;
  nlohmann::json pins = nlohmann::json::array();
  for (const auto& p : cfg.image_grid_pinpoints) pins.push_back({p.height, p.width});
  const nlohmann::json pre = {{"image_processor_type", "LlavaNextImageProcessor"},
                              {"crop_size", {{"height", s}, {"width", s}}},
                              {"size", {{"shortest_edge", s}}},
                              {"image_grid_pinpoints", pins},
                              {"image_mean", {0.48145466, 0.4578275, 0.40821073}},
                              {"image_std", {0.26862954, 0.26130258, 0.27577711}},
                              {"resample", 3},
                              {"do_center_crop", true},
                              {"do_normalize", true},
                              {"do_rescale", true},
                              {"do_resize", true},
                              {"do_pad", true}};
  std::ofstream out(std::filesystem::path(dir) / "preprocessor_config.json");
  out << pre.dump(2) << "\n";
  if (!out) throw IoError("cannot write preprocessor_config.json in " + dir);
}

void write_random_llava_next(const std::string& dir, const LlavaNextConfig& cfg, uint64_t seed,
                             c10::ScalarType dtype) {
  std::error_code ec;  // the tokenizer first: it refuses a bad image_token_index before the weights are made
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  write_random_tokenizer(dir, cfg.llava);
  auto net = random_llava_next_net(cfg, seed, dtype);
  save_llava_next(dir, cfg, net, dtype);
  write_next_preprocessor_config(dir, cfg);
}

}  // namespace vispco
