// The preset table and random-weight model folders.
#include "model/llava/presets.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/named_table.h"
#include "io/tokenizer.h"
#include "model/llava/llava_shape.h"

namespace vispco {

namespace {

LlavaConfig clip_l336() {
  LlavaConfig c;
  c.vision = clip_vit_l14_336();
  c.image_token_index = 32000;
  c.pad_token_id = 32001;
  c.text.vocab_size = 32064;
  c.text.rms_norm_eps = 1e-5;
  return c;
}

LlavaConfig tiny() {
  LlavaConfig c;
  c.vision = {.hidden_size = 32,
              .intermediate_size = 64,
              .num_hidden_layers = 2,
              .num_attention_heads = 2,
              .image_size = 56,
              .patch_size = 14};
  c.text.vocab_size = 448;
  c.text.hidden_size = 64;
  c.text.intermediate_size = 128;
  c.text.num_hidden_layers = 4;
  c.text.num_attention_heads = 4;
  c.text.num_key_value_heads = 2;
  c.text.max_position_embeddings = 512;
  c.text.rms_norm_eps = 1e-5;
  c.image_token_index = 400;
  return c;
}

LlavaConfig llava_7b() {
  auto c = clip_l336();
  c.text.max_position_embeddings = 4096;
  c.text.num_key_value_heads = 32;
  return c;  // the other LlamaConfig defaults are the 7B dimensions
}

LlavaConfig llava_tinyllama() {
  auto c = clip_l336();
  c.text.hidden_size = 2048;
  c.text.intermediate_size = 5632;
  c.text.num_hidden_layers = 22;
  c.text.num_attention_heads = 32;
  c.text.num_key_value_heads = 4;
  c.text.max_position_embeddings = 2048;
  return c;
}

// Restores LibTorch's default dtype on scope exit.
}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> table = {
      {"tiny", "tests: 56 px, N_v = 16, ViT 2×32, Llama 4×64 with GQA 4/2, vocab 448", tiny()},
      {"llava-1.5-7b", "CLIP ViT-L/336 + Vicuna-7B dimensions (N_v = 576)", llava_7b()},
      {"llava-tinyllama-1.1b", "CLIP ViT-L/336 + TinyLlama-1.1B dimensions (N_v = 576, GQA 32/4)",
       llava_tinyllama()},
  };
  return table;
}

const ModelPreset& find_preset(const std::string& name) {
  return find_named(model_presets(), name, "preset");
}

LlavaConfig truncated_config(const LlavaConfig& cfg, int64_t n_layers) {
  if (n_layers < 0)
    throw InvalidArgument("layers must be ≥ 0, 0 = full depth (got " + std::to_string(n_layers) + ")");
  if (n_layers == 0) return cfg;
  LlavaConfig c = cfg;
  c.text.num_hidden_layers = std::min(n_layers, cfg.text.num_hidden_layers);
  const int64_t n_vision = std::min(n_layers, cfg.n_vision_layers_used());
  if (n_vision < cfg.n_vision_layers_used()) {
    // Build exactly the layers that run: the feature layer becomes the last one (−1) of a shorter tower.
    c.vision.num_hidden_layers = n_vision;
    c.vision_feature_layer = -1;
  }
  return c;
}

ModelShape preset_shape(const std::string& name, int64_t n_layers) {
  return llava_shape(truncated_config(find_preset(name).config, n_layers));
}

VisionLanguageModel random_preset_model(const std::string& name, int64_t n_layers, uint64_t seed,
                                        const RunContext& ctx) {
  const LlavaConfig cfg = truncated_config(find_preset(name).config, n_layers);
  auto net = random_llava_net(cfg, seed, ctx.dtype);
  net->to(ctx.device);
  return VisionLanguageModel(cfg, net, io::Tokenizer{}, ctx);
}

LlavaNet random_llava_net(const LlavaConfig& cfg, uint64_t seed, c10::ScalarType dtype) {
  return random_net<LlavaNet>(cfg, seed, dtype);
}

void init_random_weights(torch::nn::Module& net) {
  at::NoGradGuard no_grad;
  for (auto& item : net.named_parameters(true)) {
    const auto& name = item.key();
    auto& p = item.value();
    const bool is_norm = name.find("norm") != std::string::npos || name.find("layrnorm") != std::string::npos;
    if (is_norm && name.size() > 6 && name.compare(name.size() - 6, 6, "weight") == 0)
      p.fill_(1.0);
    else if (name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0)
      p.zero_();
    else
      p.normal_(0.0, 0.02);
  }
}

std::vector<std::string> builtin_tokenizer_corpus() {
  const std::vector<std::string> colours = {"red",    "green",  "blue", "yellow",
                                            "purple", "orange", "gray", "cyan"};
  const std::vector<std::string> shapes = {"cube", "sphere", "cylinder", "cone", "triangle", "star", "ring"};
  const std::vector<std::string> words = {"left",  "right", "above", "below", "bigger", "smaller",
                                          "yes",   "no",    "what",  "how",   "many",   "is",
                                          "there", "the",   "of",    "a",     "text",   "say"};
  std::vector<std::string> out;
  for (const auto& c : colours)
    for (const auto& s : shapes) {
      out.push_back("What colour is the " + s + "? " + c);
      out.push_back("What shape is the " + c + " object? " + s);
      out.push_back("How many " + c + " " + s + "s are there? 3");
      out.push_back("Is there a " + c + " " + s + " in the image? yes no");
    }
  for (const auto& w : words) out.push_back("USER: " + w + " ASSISTANT: " + w);
  for (int i = 0; i < 200; ++i)
    out.push_back("The text says " + std::to_string(i * 37 % 1000) + " AB" + char('A' + i % 26));
  return out;
}

void write_preprocessor_config(const std::string& dir, const LlavaConfig& cfg) {
  nlohmann::json pre = {{"image_processor_type", "CLIPImageProcessor"},
                        {"crop_size", {{"height", cfg.vision.image_size}, {"width", cfg.vision.image_size}}},
                        {"size", {{"shortest_edge", cfg.vision.image_size}}},
                        {"image_mean", {0.48145466, 0.4578275, 0.40821073}},
                        {"image_std", {0.26862954, 0.26130258, 0.27577711}},
                        {"do_normalize", true},
                        {"do_resize", true}};
  std::ofstream out(std::filesystem::path(dir) / "preprocessor_config.json");
  out << pre.dump(2) << "\n";
  if (!out) throw IoError("cannot write preprocessor_config.json in " + dir);
}

void write_random_llava(const std::string& dir, const LlavaConfig& cfg, uint64_t seed,
                        c10::ScalarType dtype) {
  if (cfg.image_token_index >= 0 && cfg.image_token_index < kImageTokenInsideVocab)
    throw InvalidArgument("write_random_llava: image_token_index " + std::to_string(cfg.image_token_index) +
                          " would be a control piece; use " + std::to_string(kImageTokenInsideVocab) +
                          " (inside the vocabulary) or an id after it");
  auto net = random_llava_net(cfg, seed, dtype);
  save_llava(dir, cfg, net, dtype);
  write_random_tokenizer(dir, cfg);
  write_preprocessor_config(dir, cfg);
}

void write_random_tokenizer(const std::string& dir, const LlavaConfig& cfg) {
  if (cfg.image_token_index >= 0 && cfg.image_token_index < kImageTokenInsideVocab)
    throw InvalidArgument("write_random_tokenizer: image_token_index " +
                          std::to_string(cfg.image_token_index) + " would be a control piece; use " +
                          std::to_string(kImageTokenInsideVocab) +
                          " (inside the vocabulary) or an id after it");
  const auto tok_path = (std::filesystem::path(dir) / "tokenizer.model").string();
  if (cfg.image_token_index == kImageTokenInsideVocab) {  // "<image>" a user-defined piece, id 3
    const int vocab = static_cast<int>(std::min<int64_t>(cfg.text.vocab_size, 4000));
    io::train_sentencepiece(builtin_tokenizer_corpus(), vocab, tok_path, {"<image>"});
  } else {
    const int vocab = static_cast<int>(std::min<int64_t>(cfg.image_token_index, 4000));
    io::train_sentencepiece(builtin_tokenizer_corpus(), vocab, tok_path);
  }
  // Either way transformers' processor learns what "<image>" is from the added tokens.
  io::write_tokenizer_config(dir, {{cfg.image_token_index, "<image>", true}});
}

}  // namespace vispco
