// Evaluating a pruning plan the one way every caller keys it: the plan bound by the front door
// (prune/bound_plan.h: scorers bound to the model folder, a learned gate's default file), results stored
// under BoundPlan::key (canonical plan text + the hash of any file a scorer read), so `vispco eval`, the
// searches, the scorer table, dynamic K, VisPCO and fine-tuning share stored results and a retrained gate is
// never served another gate's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "model/vlm.h"
#include "prune/bound_plan.h"
#include "prune/plan.h"
#include "prune/scorer.h"

namespace vispco::eval {

/// The result-store key of `plan` bound to `env`: BoundPlan::bind(plan, shape, env).key() ("none" for the
/// empty plan). @throws what BoundPlan::bind throws (a plan the model cannot run, a missing gate file).
std::string plan_store_key(const PruningPlan& plan, const ModelShape& shape, const ScorerEnv& env);

/// evaluate() with a bound plan (a fresh hook seeded with `seed`; unpruned = no hook), options.plan set to
/// its key. @throws InvalidArgument for a keep=auto plan (evaluate its static plans at K), what evaluate()
/// throws.
EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const BoundPlan& plan, uint64_t seed = 0);

/// evaluate_plan() of BoundPlan::bind(plan, model.shape(), env). @throws what binding and evaluate() throw.
EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const PruningPlan& plan, const ScorerEnv& env,
                         uint64_t seed = 0);

/// Samples that share one plan (indices into a dataset's samples).
struct PlanGroup {
  PruningPlan plan;
  std::vector<size_t> samples;
  /// The plan bound already (a keep=auto plan's rung: no file read again), or unset: `plan` is bound here.
  std::optional<BoundPlan> bound;
};

/// Evaluates samples under per-sample plans (VisPCO's predicted plans, dynamic K's keep=auto): each group
/// runs as one evaluate_plan() on its samples, so a batch never mixes plans (DESIGN.md §5.1: group by K), and
/// its results are stored under the full dataset's hash and the group's plan key like any other evaluation.
/// @param groups the groups, evaluated in the map's order; options.limit, shard and out_dir are ignored (the
///        groups name the samples) @param order the samples in the order the merged rows take (each in one
///        group) @param on_group called after each group with its map key and report (progress, counts)
/// @return the merged report: rows in `order` (samples whose image was skipped left out), n_evaluated /
///         n_from_store / n_skipped / warnings summed, n_selected = order.size(), n_dataset, metrics
///         summarised, key = the first group's with key.plan = "" (the caller names the per-sample plan).
/// @throws what evaluate_plan() throws.
EvalReport evaluate_plan_groups(
    VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset, EvalOptions options,
    const std::map<std::string, PlanGroup>& groups, const std::vector<size_t>& order, const ScorerEnv& env,
    uint64_t seed = 0,
    const std::function<void(const std::string& key, const EvalReport& group)>& on_group = {});

}  // namespace vispco::eval
