// `keep=auto` plans (issue 18): "scorer[:layer=ℓ][,option=value…],keep=auto[:file=PATH]" — one stage whose K
// a K predictor (prune/auto_keep/k_predictor.h) chooses per sample from the image and the question. Each
// sample then runs the static plan at its K, so results share the result store with static plans, and a batch
// groups samples of one K (no padding). The default predictor file is `<model>/k_predictor.safetensors`.
// Callers reach this through the plan front door (prune/bound_plan.h), which recognises keep=auto and loads
// the predictor once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.h"
#include "prune/auto_keep/k_predictor.h"
#include "prune/plan.h"

namespace vispco {

/// A parsed keep=auto plan.
struct AutoKeepPlan {
  std::string template_text;   ///< canonical one-stage template without keep, e.g. "divprune:layer=0"
  std::string predictor_file;  ///< the file= option; "" = default_k_predictor_path(model folder)
  /// Keep values are ratios in ‰ of each image's own N_v (a "permille" ladder), not counts K. Set from the
  /// predictor's ladder by load_plan_predictor.
  bool permille = false;
  /// The static plan at a keep value: the template with keep=K, or with keep=P% (P = keep/10, one decimal)
  /// when permille. @throws InvalidArgument when it does not fit `shape`.
  PruningPlan at(int64_t keep, const ModelShape& shape) const;
  /// Whether the keep value keeps every visual token (K ≥ N_v, or ≥ 1000 ‰): that rung runs unpruned.
  bool full(int64_t keep, const ModelShape& shape) const;
  /// How a keep value reads in logs and reports: "K=64" or "keep 25.0%".
  std::string keep_text(int64_t keep) const;
  /// "T,keep=auto" (with ":file=…" when set).
  std::string to_string() const;
};

/// The keep=auto plan of a one-stage template without keep: "divprune" → "divprune:keep=auto",
/// "fastv:layer=2" → "fastv:layer=2,keep=auto".
std::string auto_keep_text(const std::string& template_text);
/// Whether a plan text asks for keep=auto (then parse_auto_keep, not parse_plan, reads it).
bool is_auto_keep(const std::string& plan_text);
/// @throws InvalidArgument for several stages, a stage that also fixes keep, or a template that does not fit
/// the model.
AutoKeepPlan parse_auto_keep(const std::string& plan_text, const ModelShape& shape);
/// `<model_dir>/k_predictor.safetensors`.
std::string default_k_predictor_path(const std::string& model_dir);

/// Loads the plan's predictor, checks that it was made for this template, this model (a count ladder ends at
/// N_v, a permille ladder at 1000; feature width) and this feature recipe, and sets plan.permille from its
/// ladder. @throws IoError, FormatError, ConfigError (a mismatch, naming what the file was trained for).
KPredictor load_plan_predictor(AutoKeepPlan& plan, const std::string& model_dir, const ModelShape& shape);

}  // namespace vispco
