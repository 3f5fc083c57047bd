// One way to evaluate and key a pruning plan (eval/plan_evaluation.h).
#include "eval/plan_evaluation.h"

#include <memory>

#include "prune/plan_hook.h"

namespace vispco::eval {

std::string plan_store_key(const PruningPlan& plan, const LlavaConfig& cfg, const ScorerEnv& env) {
  return plan.empty() ? plan.to_string() : PlanHook(plan, cfg, /*seed=*/0, env).store_key();
}

EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const PruningPlan& plan, const ScorerEnv& env, uint64_t seed) {
  std::unique_ptr<PlanHook> hook;
  if (!plan.empty()) hook = std::make_unique<PlanHook>(plan, model.config(), seed, env);
  options.plan = hook ? hook->store_key() : plan.to_string();
  return evaluate(model, model_hash, dataset, options, hook.get());
}

}  // namespace vispco::eval
