// Evaluating a pruning plan the one way every caller keys it: the plan's scorers bound to the model folder
// (a learned gate's default file), results stored under PlanHook::store_key (canonical plan text + the hash
// of any file a scorer read), so `vispco eval`, the searches, the scorer table, dynamic K, VisPCO and
// fine-tuning share stored results and a retrained gate is never served another gate's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "model/vlm.h"
#include "prune/plan.h"
#include "prune/scorer.h"

namespace vispco {
class PlanHook;
}

namespace vispco::eval {

/// A plan ready to evaluate, as one value: the plan, its scorers bound to the model folder once (a
/// PlanHook seeded with `seed`), and the key its results are stored under (plan_store_key()). Bind it before
/// the slow steps: a plan the model cannot run or a missing gate file fails here. Move-only; one evaluation
/// at a time.
class BoundPlan {
 public:
  /// @throws what plan_store_key() throws.
  BoundPlan(PruningPlan plan, const ModelShape& shape, const ScorerEnv& env, uint64_t seed = 0);
  BoundPlan(BoundPlan&&) noexcept;
  BoundPlan& operator=(BoundPlan&&) noexcept;
  ~BoundPlan();
  const PruningPlan& plan() const { return plan_; }
  /// The result-store key: "none" for the empty plan, else PlanHook::store_key().
  const std::string& key() const { return key_; }
  /// The bound hook, nullptr for the empty plan.
  PlanHook* hook() { return hook_.get(); }

 private:
  PruningPlan plan_;
  std::unique_ptr<PlanHook> hook_;
  std::string key_;
};

/// The result-store key of `plan` with its scorers bound to `env`: "none" for the empty plan, else
/// PlanHook::store_key(). @throws InvalidArgument for a plan the model cannot run, what binding a scorer
/// throws (e.g. a missing gate file).
std::string plan_store_key(const PruningPlan& plan, const ModelShape& shape, const ScorerEnv& env);

/// evaluate() with a bound plan (its hook; empty = unpruned), options.plan set to its key.
/// @throws what evaluate() throws.
EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, BoundPlan& plan);

/// evaluate_plan() of BoundPlan(plan, model.shape(), env, seed). @throws what binding and evaluate() throw.
EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const PruningPlan& plan, const ScorerEnv& env,
                         uint64_t seed = 0);

/// Samples that share one plan (indices into a dataset's samples).
struct PlanGroup {
  PruningPlan plan;
  std::vector<size_t> samples;
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
