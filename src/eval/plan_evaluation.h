// Evaluating a pruning plan the one way every caller keys it: the plan's scorers bound to the model folder
// (a learned gate's default file), results stored under PlanHook::store_key (canonical plan text + the hash
// of any file a scorer read), so `vispco eval`, the searches, the scorer table, dynamic K, VisPCO and
// fine-tuning share stored results and a retrained gate is never served another gate's.
#pragma once
#include <cstdint>
#include <string>

#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "model/llava.h"
#include "prune/plan.h"
#include "prune/scorer.h"

namespace vispco::eval {

/// The result-store key of `plan` with its scorers bound to `env`: "none" for the empty plan, else
/// PlanHook::store_key(). @throws InvalidArgument for a plan the model cannot run, what binding a scorer
/// throws (e.g. a missing gate file).
std::string plan_store_key(const PruningPlan& plan, const LlavaConfig& cfg, const ScorerEnv& env);

/// evaluate() with `plan` (empty = unpruned) run through a PlanHook bound to `env` and seeded with `seed`
/// (stochastic scorers), options.plan set to plan_store_key(). @throws what evaluate() and binding throw.
EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const PruningPlan& plan, const ScorerEnv& env,
                         uint64_t seed = 0);

}  // namespace vispco::eval
