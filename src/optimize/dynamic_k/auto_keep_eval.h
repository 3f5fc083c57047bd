// Evaluating a keep=auto plan (issue 18): predict K for every selected sample (k_features.h + the predictor),
// then evaluate each group of equal K with the static plan at that K — batches never mix K, so nothing is
// padded — and merge the groups' rows back into dataset order. Results are stored under the static plans'
// keys, so a dynamic evaluation re-uses (and fills) the same store as static ones.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "eval/evaluator.h"
#include "prune/bound_plan.h"

namespace vispco::optimize {

/// Batching of one dynamic evaluation: grouped by K against batches formed in arrival (dataset) order.
struct KBatching {
  size_t batch_size = 1;
  size_t n_batches_grouped = 0;      ///< Σ_K ⌈n_K / B⌉ (what runs), no padding
  size_t n_batches_arrival = 0;      ///< ⌈n / B⌉ if rows of any K shared a batch
  int64_t kept_slots = 0;            ///< Σ K over samples (visual-token slots the grouped batches fill)
  int64_t padded_slots_arrival = 0;  ///< Σ over arrival batches of Σ_rows (max K of the batch − K): padding
  nlohmann::json to_json() const;
};
/// Batching figures for per-sample K values in arrival order. @throws InvalidArgument for batch 0.
KBatching k_batching(const std::vector<int64_t>& keeps, size_t batch_size);

/// What evaluate_auto_keep returns.
struct AutoKeepEval {
  eval::EvalReport report;    ///< merged over the K groups, rows in dataset order; key.plan = the auto plan
  std::vector<int64_t> keep;  ///< [n rows] the K each row ran with
  std::map<int64_t, size_t> groups;  ///< K → samples
  KBatching batching;
  double tower_ms = 0, feature_ms = 0, predictor_ms = 0;  ///< totals of the K prediction pass
  nlohmann::json to_json() const;
};

/// @param model_hash the model's store key @param plan a keep=auto plan from the front door (its predictor
/// and every rung's static plan bound) @param options as for eval::evaluate; options.plan is ignored (each
/// group's key is its static plan's), shuffle_images is refused, out_dir receives the merged outputs.
/// @throws InvalidArgument (shuffle, bad options, a plan that is not keep=auto), what eval::evaluate and the
/// predictor throw.
AutoKeepEval evaluate_auto_keep(VisionLanguageModel& model, const std::string& model_hash,
                                const eval::Dataset& dataset, const eval::EvalOptions& options,
                                const BoundPlan& plan);

}  // namespace vispco::optimize
