// keep=auto evaluation: predict, group by K, evaluate each group, merge (see auto_keep_eval.h).
#include "optimize/dynamic_k/auto_keep_eval.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/timer.h"
#include "eval/plan_evaluation.h"
#include "optimize/dynamic_k/k_features.h"

namespace vispco::optimize {

nlohmann::json KBatching::to_json() const {
  return {{"batch_size", batch_size},
          {"batches_grouped_by_k", n_batches_grouped},
          {"batches_arrival_order", n_batches_arrival},
          {"kept_visual_slots", kept_slots},
          {"padded_visual_slots_arrival_order", padded_slots_arrival}};
}

KBatching k_batching(const std::vector<int64_t>& keeps, size_t batch_size) {
  if (batch_size < 1) throw InvalidArgument("k batching: batch size must be ≥ 1");
  KBatching b;
  b.batch_size = batch_size;
  std::map<int64_t, size_t> groups;
  for (auto k : keeps) {
    groups[k] += 1;
    b.kept_slots += k;
  }
  for (const auto& [k, n] : groups) b.n_batches_grouped += (n + batch_size - 1) / batch_size;
  for (size_t s = 0; s < keeps.size(); s += batch_size) {
    const size_t e = std::min(keeps.size(), s + batch_size);
    const int64_t top = *std::max_element(keeps.begin() + s, keeps.begin() + e);
    for (size_t i = s; i < e; ++i) b.padded_slots_arrival += top - keeps[i];
    b.n_batches_arrival += 1;
  }
  return b;
}

nlohmann::json AutoKeepEval::to_json() const {
  nlohmann::json g = nlohmann::json::object();
  for (const auto& [k, n] : groups) g[std::to_string(k)] = n;
  double mean_k = 0;
  for (auto k : keep) mean_k += static_cast<double>(k);
  if (!keep.empty()) mean_k /= static_cast<double>(keep.size());
  return {{"report", report.to_json()},     {"mean_keep", mean_k},  {"groups", g},
          {"batching", batching.to_json()}, {"tower_ms", tower_ms}, {"feature_ms", feature_ms},
          {"predictor_ms", predictor_ms}};
}

AutoKeepEval evaluate_auto_keep(VisionLanguageModel& model, const std::string& model_hash,
                                const eval::Dataset& dataset, const eval::EvalOptions& options,
                                const BoundPlan& plan) {
  options.validate();
  if (!plan.is_auto()) throw InvalidArgument("evaluate_auto_keep: plan " + plan.text() + " is not keep=auto");
  if (options.shuffle_images) throw InvalidArgument("eval: --shuffle-images does not combine with keep=auto");
  Stopwatch wall;
  const size_t n_limited =
      options.limit == 0 ? dataset.samples.size() : std::min(options.limit, dataset.samples.size());
  std::vector<size_t> selected;
  for (size_t i = options.shard_index; i < n_limited; i += options.shard_count) selected.push_back(i);

  AutoKeepEval out;
  auto feats = dataset_k_features(model, dataset, selected, std::max<size_t>(1, options.batch_size));
  out.tower_ms = feats.tower_ms;
  out.feature_ms = feats.feature_ms;
  Stopwatch pred;
  const auto keeps = plan.predict_keep(feats.features);
  out.predictor_ms = pred.ms();
  std::map<std::string, int64_t> keep_of;  // sample id → K
  std::map<int64_t, std::vector<size_t>> by_k;
  for (size_t j = 0; j < selected.size(); ++j) {
    const int64_t k = keeps[j];
    by_k[k].push_back(selected[j]);
    keep_of[dataset.samples[selected[j]].id] = k;
  }

  std::map<std::string, eval::PlanGroup> groups;  // plan key → the samples predicted that K
  for (const auto& [k, idx] : by_k) {
    const BoundPlan at_k = plan.at_keep(k);
    auto& group = groups[at_k.text()];
    group.plan = at_k.plan();
    group.bound = at_k;  // every rung was bound with the plan: no gate file read again
    group.samples.insert(group.samples.end(), idx.begin(), idx.end());
    out.groups[k] = idx.size();
  }
  eval::EvalReport merged = eval::evaluate_plan_groups(model, model_hash, dataset, options, groups, selected,
                                                       plan.env(), options.generation.seed);
  merged.key.plan = plan.text();
  for (const auto& r : merged.rows) out.keep.push_back(keep_of.at(r.id));
  std::vector<int64_t> arrival;
  for (auto i : selected) arrival.push_back(keep_of.at(dataset.samples[i].id));
  merged.wall_s = wall.ms() / 1000.0;
  merged.samples_per_s =
      merged.n_evaluated > 0 && merged.wall_s > 0 ? merged.n_evaluated / merged.wall_s : 0.0;
  out.batching = k_batching(arrival, options.batch_size);
  out.report = std::move(merged);
  if (!options.out_dir.empty()) {
    eval::EvalOptions o = options;
    o.plan = out.report.key.plan;
    eval::write_eval_outputs(out.report, o, options.out_dir);
  }
  return out;
}

}  // namespace vispco::optimize
