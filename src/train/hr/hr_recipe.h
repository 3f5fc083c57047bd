// The training recipe of the bundled high-resolution model (models/synthvqa-hr, issue 48): LLaVA-NeXT
// structure started from the bundled SynthVQA model's tower, projector and decoder plus a fresh
// image_newline, then two stages on SynthVQA-HR — (1) the tower and linear patch heads on dense per-patch
// labels of the AnyRes views (base view + 336-px tiles; train/hr/hr_views.h), so that it resolves tiny
// objects and small text; (2) projector + image_newline + decoder on multi-turn HR conversations with the
// tower frozen, loss on the answer tokens (LLaVA's instruction tuning, Liu et al. 2023 §4.2).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "train/recipe.h"

namespace vispco::train {

/// The whole HR recipe (a plain value: defaults, validate(), JSON round trip, equality).
struct HrRecipe {
  /// Stage 1: tower + patch heads. Only the optimiser fields (steps, batch = images, each 1 + tiles views,
  /// lr, warmup, weight_decay, clip) may be set; glyph_weight weighs the character head as in recipe.h.
  StageSettings tower{.steps = 600, .batch = 4, .lr = 3e-4};
  /// Stage 2: projector + image_newline + decoder; the optimiser fields (batch = images) and
  /// answer_grounding, the weight of the answer-row attention loss (train/hr/hr_grounding.h; 0 = token loss
  /// alone).
  StageSettings decoder{.steps = 1200, .batch = 4, .lr = 3e-4};
  int64_t turns = 6;                 ///< question/answer turns per image in stage 2, ≥ 1
  uint64_t seed = 1;                 ///< patch heads, image_newline and question sampling
  uint64_t data_seed = 20260701;     ///< SynthVQA-HR seed of training images (disjoint from hr-calib/hr-test)
  int64_t checkpoint_seconds = 120;  ///< write a checkpoint at least this often (wall clock), ≥ 1
  /// Held-out probe every this many steps of either stage and at each stage's end, ≥ 0 (0 = off): stage 1
  /// the patch heads' foreground accuracy on 8 images (<out>/tower_probe.jsonl), stage 2 greedy answers on
  /// probe_per_family unseen HR scenes per family (<out>/probe.jsonl).
  int64_t probe_every = 100;
  int64_t probe_per_family = 4;  ///< ≥ 1
  /// @throws InvalidArgument naming the bad field.
  void validate() const;
  bool operator==(const HrRecipe&) const = default;
};

nlohmann::json to_json(const HrRecipe& r);
/// @throws InvalidArgument / ConfigError for unknown keys or bad values.
HrRecipe hr_recipe_from_json(const nlohmann::json& j);
/// Reads a recipe file. @throws IoError, FormatError, InvalidArgument.
HrRecipe load_hr_recipe(const std::string& path);

}  // namespace vispco::train
