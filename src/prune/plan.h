// Pruning plans (DESIGN.md §2): an ordered list of stages (layer ℓ, kept visual tokens K_ℓ, scorer), ℓ = 0
// meaning after the projector and before the LLM, ℓ ≥ 1 after decoder layer ℓ−1; K non-increasing over
// stages. Compact syntax: stages joined by '+', each "scorer[:layer=ℓ],keep=K[,option=value…]" (K a count, or
// a share of each image's N_v as "keep=25%"), e.g.
//   "fastv:layer=2,keep=64"  or  "fastv:layer=8,keep=288+fastv:layer=16,keep=144+fastv:layer=24,keep=72"
// (without layer= a stage acts at its method's paper layer, ScorerEntry::default_layer: "visionzip:keep=64"
// is ℓ = 0, "fastv:keep=64" ℓ = 2) and the PyramidDrop shorthand "pdrop:layers=8/16/24,ratio=0.5" (keep
// ×ratio at each boundary, N_v at start; layers default to L/4, L/2, 3L/4; keep=K instead of ratio= ends at
// K). "none" or "" is the empty plan. A path ending in ".json" is read as {"stages": [{"scorer", "layer",
// "keep", "options": {…}}, …]}.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/shape.h"

namespace vispco {

/// One pruning stage.
struct PruneStage {
  /// Where it acts: 0 = after the projector (before the LLM), ℓ ≥ 1 = after decoder layer ℓ−1. Valid: [0, L).
  int64_t layer = 0;
  /// Visual tokens kept after this stage, K_ℓ. Valid: [1, N_v], ≤ the previous stage's K. With keep_percent
  /// set, the count at the model's nominal N_v (ModelShape::n_visual_tokens), for validation and cost
  /// estimates; each image's own K is resolved from its N_v (resolve_keep).
  int64_t keep = 0;
  /// Scorer name (registry in prune/scorer.h).
  std::string scorer;
  /// Scorer-specific options (name → value as text), checked by the scorer.
  std::map<std::string, std::string> options;
  /// keep=P%: K as a share of each image's own N_v, K = max(1, round(P/100 · N_v)) (for families whose images
  /// make different numbers of visual tokens); 0 when keep is a count. Valid: (0, 100].
  double keep_percent = 0;
  bool operator==(const PruneStage&) const = default;
};

/// K of `stage` for an image of `n_visual` visual tokens: keep_percent of it (rounded half away from zero, at
/// least 1) when set, else `keep` (a count above the image's N_v keeps every token).
int64_t resolve_keep(const PruneStage& stage, int64_t n_visual);

/// An ordered list of stages; empty = no pruning.
struct PruningPlan {
  std::vector<PruneStage> stages;

  bool empty() const { return stages.empty(); }
  /// Canonical compact text (parse(to_string()) == *this); "none" when empty. Used as the result-store key.
  std::string to_string() const;
  /// Checks the plan against a model: layers in [0, L) and strictly increasing, keep in [1, N_v] and
  /// non-increasing, known scorers whose hook point allows the layer, known options.
  /// @throws InvalidArgument naming the stage and the problem.
  void validate(const ModelShape& shape) const;
  bool operator==(const PruningPlan&) const = default;
};

/// Parses the compact syntax, "none", or a .json file path, filling each method's default layer. Syntax
/// errors only (ranges need the model: validate()). @param n_visual N_v @param n_layers the decoder's L, for
/// PyramidDrop's default layers (0 = unknown: pdrop must then name its layers).
/// @throws InvalidArgument naming the bad piece or an unknown scorer without layer=; IoError/FormatError for
/// a bad .json file.
PruningPlan parse_plan(const std::string& text, int64_t n_visual, int64_t n_layers = 0);
/// parse_plan() with N_v and L from the model's config.
PruningPlan parse_plan(const std::string& text, const ModelShape& shape);

nlohmann::json to_json(const PruningPlan& plan);
/// @throws InvalidArgument for a malformed object.
PruningPlan plan_from_json(const nlohmann::json& j);

}  // namespace vispco
