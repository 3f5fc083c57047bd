// Named LLaVA configurations for random-weight models (tests, speed benchmarks at real dimensions) and the
// writer of a complete random-weight Hugging Face folder (`vispco init-random`).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/default_dtype.h"
#include "model/llava/config.h"
#include "model/llava/llava.h"
#include "model/shape.h"

namespace vispco {

/// One entry of a family's preset table: a named configuration (`Config`: LlavaConfig, LlavaNextConfig).
template <class Config>
struct Preset {
  std::string name;
  std::string description;
  Config config;
};
/// One entry of the LLaVA-1.5 preset table.
using ModelPreset = Preset<LlavaConfig>;

/// The preset table: "tiny" (tests: 56 px, N_v = 16, 4 decoder layers, GQA), "llava-1.5-7b" (CLIP ViT-L/336 +
/// Vicuna-7B dimensions, N_v = 576), "llava-tinyllama-1.1b" (CLIP ViT-L/336 + TinyLlama-1.1B dimensions,
/// GQA 32/4).
const std::vector<ModelPreset>& model_presets();
/// @throws InvalidArgument listing the valid names.
const ModelPreset& find_preset(const std::string& name);

/// A network with random weights, HF-style initialisation (normal(0, 0.02) matrices and embeddings, zero
/// biases, unit norm weights), built directly in `dtype` to keep peak memory at one copy. Deterministic by
/// seed.
LlavaNet random_llava_net(const LlavaConfig& cfg, uint64_t seed, c10::ScalarType dtype);

/// HF-style initialisation of every parameter of `net` in place (random_llava_net's rule): weights of norms
/// (names holding "norm" or "layrnorm") 1, biases 0, everything else normal(0, 0.02), drawn in
/// named_parameters() order from LibTorch's default generator.
void init_random_weights(torch::nn::Module& net);

/// The steps random_llava_net and random_llava_next_net share: `cfg.validate()`, LibTorch's default generator
/// seeded with `seed`, `Net(cfg)` built directly in `dtype`, then init_random_weights. The seed is not scoped
/// (core/seed_guard.h): the model trainer's later draws continue from it, and its runs (resume equals from
/// scratch) depend on that. @throws ConfigError (cfg.validate()).
template <class Net, class Config>
Net random_net(const Config& cfg, uint64_t seed, c10::ScalarType dtype) {
  cfg.validate();
  DefaultDtypeGuard guard(dtype);
  at::manual_seed(seed);
  Net net(cfg);
  init_random_weights(*net);
  return net;
}

/// `cfg` with depth truncated to N ≥ 1 layers for a quick benchmark: the decoder to min(N, L) layers and the
/// vision tower to min(N, n_vision_layers_used()) layers (the feature layer becomes the last one built),
/// keeping every width; unchanged for N = 0. @throws InvalidArgument when n_layers < 0.
LlavaConfig truncated_config(const LlavaConfig& cfg, int64_t n_layers);

/// The shape of preset `name` truncated by `n_layers` (truncated_config). @throws InvalidArgument (unknown
/// name, listing the valid ones; n_layers < 0).
ModelShape preset_shape(const std::string& name, int64_t n_layers);

/// A random-weight model of preset `name` truncated by `n_layers`, built in ctx.dtype on ctx.device with an
/// empty tokenizer (prompt ids must be built directly). Deterministic by seed (random_llava_net).
/// @throws InvalidArgument as preset_shape().
VisionLanguageModel random_preset_model(const std::string& name, int64_t n_layers, uint64_t seed,
                                        const RunContext& ctx);

/// image_token_index that puts "<image>" inside the SentencePiece vocabulary (the first id after unk, BOS,
/// EOS).
inline constexpr int64_t kImageTokenInsideVocab = 3;

/// Writes a random-weight LLaVA folder: config.json, model.safetensors (weights in `dtype`),
/// tokenizer.model (a small SentencePiece model trained on a built-in VQA-style corpus),
/// tokenizer_config.json declaring "<image>" as a special added token at image_token_index, and
/// preprocessor_config.json. Two tokenizer kinds, as checkpoints have them: image_token_index =
/// kImageTokenInsideVocab makes "<image>" a user-defined piece (id 3) of a min(text vocab_size, 4000)-piece
/// model; any larger id gets a model of min(image_token_index, 4000) pieces with the image token after them
/// (HF llava-1.5: 32000).
/// @throws IoError, ConfigError; InvalidArgument for image_token_index in [0, 3).
void write_random_llava(const std::string& dir, const LlavaConfig& cfg, uint64_t seed, c10::ScalarType dtype);

/// The tokenizer files of write_random_llava: tokenizer.model (trained on builtin_tokenizer_corpus(), the
/// two kinds described there) and tokenizer_config.json declaring "<image>" at cfg.image_token_index.
/// @throws IoError; InvalidArgument for image_token_index in [0, 3).
void write_random_tokenizer(const std::string& dir, const LlavaConfig& cfg);

/// Writes `<dir>/preprocessor_config.json` (CLIPImageProcessor at the tower's size, CLIP mean/std). @throws
/// IoError.
void write_preprocessor_config(const std::string& dir, const LlavaConfig& cfg);

/// A few hundred VQA-style sentences (questions and short answers), the tokenizer corpus of random models.
std::vector<std::string> builtin_tokenizer_corpus();

}  // namespace vispco
