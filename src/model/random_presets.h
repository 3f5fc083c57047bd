// Every family's random-weight presets in one table, and random folders from a config.json: what
// `vispco init-random` writes (tests, benchmarks at real dimensions). Each family keeps its own preset table
// (model/llava/presets.h, model/llava_next/presets.h, model/qwen2_vl/presets.h); this joins them by name and
// by config.json model_type.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/shape.h"

namespace vispco {

class VisionLanguageModel;

/// One named random-weight model of some family.
struct RandomPreset {
  std::string name;         ///< e.g. "tiny", "tiny-next", "qwen2.5-vl-3b"
  std::string family;       ///< the family's name for people, e.g. "LLaVA-NeXT"
  std::string description;  ///< one line
  /// Writes the folder; returns one line saying what was written. @throws IoError, ConfigError.
  std::function<std::string(const std::string& dir, uint64_t seed, c10::ScalarType dtype)> write;
  /// The shape of the preset truncated to `n_layers` (0 = full depth; else the decoder to min(N, L) layers
  /// and the vision tower to min(N, its layers), widths kept). @throws InvalidArgument when n_layers < 0.
  std::function<ModelShape(int64_t n_layers)> shape;
  /// The preset built in memory with random weights (the writer's initialisation, no folder), truncated as
  /// `shape`, in ctx.dtype on ctx.device, with an empty tokenizer (prompts are built from ids). For
  /// benchmarks. @throws InvalidArgument as `shape`.
  std::function<VisionLanguageModel(int64_t n_layers, uint64_t seed, const RunContext& ctx)> build;
};

/// LLaVA-1.5's, then LLaVA-NeXT's, then Qwen2-VL's presets.
const std::vector<RandomPreset>& random_presets();

/// @throws InvalidArgument listing every valid name.
const RandomPreset& find_random_preset(const std::string& name);

/// Writes a random folder for a transformers config.json object (model_type llava, llava_next, qwen2_vl,
/// qwen2_5_vl; a training recipe's "model" section is a LLaVA config). @return the line random_presets'
/// writers return. @throws ConfigError (unknown model_type, bad field), IoError.
std::string write_random_from_config(const nlohmann::json& config, const std::string& dir, uint64_t seed,
                                     c10::ScalarType dtype);

}  // namespace vispco
