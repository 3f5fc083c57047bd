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
  /// The static plan at K (the template with keep=K). @throws InvalidArgument when it does not fit `shape`.
  PruningPlan at(int64_t keep, const ModelShape& shape) const;
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

/// Loads the plan's predictor and checks that it was made for this template, this model (ladder ends at
/// N_v, feature width) and this feature recipe. @throws IoError, FormatError, ConfigError (a mismatch,
/// naming what the file was trained for).
KPredictor load_plan_predictor(const AutoKeepPlan& plan, const std::string& model_dir,
                               const ModelShape& shape);

}  // namespace vispco
