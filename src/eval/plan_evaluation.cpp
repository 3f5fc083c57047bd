// One way to evaluate and key a pruning plan (eval/plan_evaluation.h).
#include "eval/plan_evaluation.h"

#include <utility>

#include "prune/plan_hook.h"

namespace vispco::eval {

std::string plan_store_key(const PruningPlan& plan, const ModelShape& shape, const ScorerEnv& env) {
  return BoundPlan::bind(plan, shape, env).key();
}

EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const BoundPlan& plan, uint64_t seed) {
  options.plan = plan.key();
  const auto hook = plan.hook(seed);
  return evaluate(model, model_hash, dataset, options, hook.get());
}

EvalReport evaluate_plan(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                         EvalOptions options, const PruningPlan& plan, const ScorerEnv& env, uint64_t seed) {
  return evaluate_plan(model, model_hash, dataset, std::move(options),
                       BoundPlan::bind(plan, model.shape(), env), seed);
}

EvalReport evaluate_plan_groups(VisionLanguageModel& model, const std::string& model_hash,
                                const Dataset& dataset, EvalOptions options,
                                const std::map<std::string, PlanGroup>& groups,
                                const std::vector<size_t>& order, const ScorerEnv& env, uint64_t seed,
                                const std::function<void(const std::string&, const EvalReport&)>& on_group) {
  options.limit = 0;
  options.shard_index = 0;
  options.shard_count = 1;
  options.out_dir.clear();
  EvalReport merged;
  std::map<std::string, EvalRow> rows;  // sample id → row
  for (const auto& [key, group] : groups) {
    Dataset sub = dataset;  // same hash: the store keys stay those of the full dataset's samples
    sub.samples.clear();
    for (auto i : group.samples) sub.samples.push_back(dataset.samples.at(i));
    EvalReport rep = group.bound ? evaluate_plan(model, model_hash, sub, options, *group.bound, seed)
                                 : evaluate_plan(model, model_hash, sub, options, group.plan, env, seed);
    if (on_group) on_group(key, rep);
    merged.n_evaluated += rep.n_evaluated;
    merged.n_from_store += rep.n_from_store;
    merged.n_skipped += rep.n_skipped;
    for (auto& w : rep.warnings) merged.warnings.push_back(w);
    for (auto& r : rep.rows) rows.emplace(r.id, std::move(r));
    if (merged.key.model_hash.empty()) merged.key = rep.key;
    merged.store_path = rep.store_path;
  }
  merged.key.plan.clear();
  merged.n_dataset = dataset.samples.size();
  merged.n_selected = order.size();
  for (auto i : order) {
    auto it = rows.find(dataset.samples.at(i).id);
    if (it != rows.end()) merged.rows.push_back(std::move(it->second));  // else: a skipped image
  }
  summarise_rows(merged);
  return merged;
}

}  // namespace vispco::eval
