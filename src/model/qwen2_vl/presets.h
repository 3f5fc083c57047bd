// Named Qwen2-VL / Qwen2.5-VL configurations for random-weight models (tests; benchmarks at the published
// dimensions) and the writer of a complete random-weight Hugging Face folder (`vispco init-random --preset
// …`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/llava/presets.h"
#include "model/qwen2_vl/config.h"
#include "model/qwen2_vl/qwen2_vl.h"

namespace vispco {

/// One entry of the Qwen2-VL preset table.
using Qwen2VlPreset = Preset<Qwen2VlConfig>;

/// The table: "tiny-qwen2-vl" and "tiny-qwen2.5-vl" (tests: a 64-wide 3-layer decoder with M-RoPE sections
/// [2, 3, 3], a 32-wide 4-block tower; Qwen2.5's with windows of 4 × 4 merged tokens and full attention in
/// blocks 1 and 3; 300-id vocabulary, Qwen2's 14 added tokens at 256–269 as published after 151643), and the
/// published dimensions of Qwen/Qwen2-VL-2B-Instruct, -7B-Instruct, Qwen/Qwen2.5-VL-3B-Instruct and
/// -7B-Instruct ("qwen2-vl-2b", "qwen2-vl-7b", "qwen2.5-vl-3b", "qwen2.5-vl-7b").
const std::vector<Qwen2VlPreset>& qwen2_vl_presets();
/// @throws InvalidArgument listing the valid names.
const Qwen2VlPreset& find_qwen2_vl_preset(const std::string& name);

/// A network with random weights (random_net's rule, model/llava/presets.h; the merger's ln_q weight 1 as
/// every other norm), built in `dtype`. Deterministic by seed. @throws ConfigError (cfg.validate()).
Qwen2VlNet random_qwen2_vl_net(const Qwen2VlConfig& cfg, uint64_t seed, c10::ScalarType dtype);

/// Writes a random-weight Qwen2-VL folder as published: config.json, model.safetensors (visual.*, model.*,
/// lm_head.*; weights in `dtype`), preprocessor_config.json (Qwen2VLImageProcessor's defaults, or
/// `processor`), and a byte-level tokenizer.json whose vocabulary is the 256 byte characters (no merges) with
/// Qwen2's added tokens at the config's ids, plus tokenizer_config.json (eos <|im_end|>, pad <|endoftext|>,
/// no BOS).
/// @throws IoError; ConfigError when the special ids collide with the byte vocabulary or each other.
void write_random_qwen2_vl(const std::string& dir, const Qwen2VlConfig& cfg, uint64_t seed,
                           c10::ScalarType dtype, const QwenImageProcessorConfig& processor = {});

}  // namespace vispco
