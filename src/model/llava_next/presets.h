// Named LLaVA-NeXT configurations for random-weight models (tests; speed benchmarks at real dimensions) and
// the writer of a complete random-weight Hugging Face folder (`vispco init-random --preset tiny-next`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/llava/presets.h"
#include "model/llava_next/config.h"
#include "model/llava_next/llava_next.h"

namespace vispco {

/// One entry of the LLaVA-NeXT preset table.
using LlavaNextPreset = Preset<LlavaNextConfig>;

/// The table: "tiny-next" (tests: the tiny LLaVA preset's 56-px tower, 14-px patches and decoder, pinpoints
/// [[56, 112], [112, 56], [112, 112]]: 16 base tokens, N_v ≤ 88), "llava-v1.6-vicuna-7b" (CLIP ViT-L/336 +
/// Vicuna-7B dimensions, the v1.6 pinpoints: N_v ≤ 2,928).
const std::vector<LlavaNextPreset>& llava_next_presets();
/// @throws InvalidArgument listing the valid names.
const LlavaNextPreset& find_llava_next_preset(const std::string& name);

/// A network with random weights (random_net, model/llava/presets.h; image_newline normal(0, 1/√D)
/// as transformers initialises it), built in `dtype`. Deterministic by seed.
LlavaNextNet random_llava_next_net(const LlavaNextConfig& cfg, uint64_t seed, c10::ScalarType dtype);

/// Writes `dir`/preprocessor_config.json for `cfg` as transformers' LlavaNextImageProcessor reads it (tile
/// side = the tower's image_size, the pinpoints, CLIP mean/std, bicubic). @throws IoError.
void write_next_preprocessor_config(const std::string& dir, const LlavaNextConfig& cfg);

/// Writes a random-weight LLaVA-NeXT folder: config.json, model.safetensors (weights in `dtype`), the
/// tokenizer files of write_random_tokenizer, and preprocessor_config.json (LlavaNextImageProcessor).
/// @throws IoError, ConfigError; InvalidArgument for image_token_index in [0, 3).
void write_random_llava_next(const std::string& dir, const LlavaNextConfig& cfg, uint64_t seed,
                             c10::ScalarType dtype);

}  // namespace vispco
