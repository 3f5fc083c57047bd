// eval/plan_evaluation.h: every caller keys a plan's stored results the same way — the canonical plan plus
// the hash of the learned gate the scorer read from the model folder — so a re-run reads the store and a
// retrained gate is evaluated afresh (the bug issue 21 read from the code: results keyed without the gate's
// hash).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/hash.h"
#include "eval/eval_fixture.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "prune/gate.h"

namespace vispco::eval {
namespace {

TEST(PlanEvaluation, KeysByTheGatesHashSoARetrainedGateIsEvaluatedAfresh) {
  auto model = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const std::string model_hash = model_folder_hash(testing::tiny_model_dir());
  const Dataset ds = load_dataset(testing::known_dataset().dir.string());
  testing::TempDir tmp;
  const ScorerEnv env{tmp.str("")};  // a model folder holding only the gate: the gate scorer's default file
  const std::string gate_path = default_gate_path(env.model_dir);
  GateConfig gc;
  gc.d_model = model.shape().hidden_size;
  gc.hidden = 8;
  TokenGate gate1(gc, 1);
  save_gate(gate_path, gate1);

  const PruningPlan plan = parse_plan("gate:layer=0,keep=4", model.shape());
  const std::string key1 = plan_store_key(plan, model.shape(), env);
  EXPECT_EQ(key1, "gate:layer=0,keep=4 @gate=sha256:" + sha256_file_hex(gate_path).substr(0, 16));
  EXPECT_EQ(plan_store_key(PruningPlan{}, model.shape(), env), "none");

  EvalOptions o;
  o.store_path = tmp.str("results.sqlite");
  const size_t n = ds.samples.size();
  const EvalReport first = evaluate_plan(model, model_hash, ds, o, plan, env);
  EXPECT_EQ(first.key.plan, key1);
  EXPECT_EQ(first.n_evaluated, n);
  const EvalReport again = evaluate_plan(model, model_hash, ds, o, plan, env);
  EXPECT_EQ(again.n_from_store, n);  // the same gate: every sample from the store
  EXPECT_EQ(again.n_evaluated, 0u);

  TokenGate gate2(gc, 2);  // "retrained": other weights, same file name
  save_gate(gate_path, gate2);
  const std::string key2 = plan_store_key(plan, model.shape(), env);
  EXPECT_NE(key2, key1);
  const EvalReport retrained = evaluate_plan(model, model_hash, ds, o, plan, env);
  EXPECT_EQ(retrained.key.plan, key2);
  EXPECT_EQ(retrained.n_evaluated, n);  // not served the old gate's results

  const EvalReport unpruned = evaluate_plan(model, model_hash, ds, o, PruningPlan{}, env);
  EXPECT_EQ(unpruned.key.plan, "none");
  EXPECT_THROW(plan_store_key(plan, model.shape(), ScorerEnv{tmp.str("elsewhere")}),
               IoError);  // no gate there
}

TEST(PlanEvaluation, GroupsMergeInTheGivenOrderAndEqualEachSampleEvaluatedAloneUnderItsPlan) {
  auto model = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const std::string model_hash = model_folder_hash(testing::tiny_model_dir());
  const Dataset ds = load_dataset(testing::known_dataset().dir.string());
  ASSERT_GE(ds.samples.size(), 3u);
  const ScorerEnv env{};
  const PruningPlan pruned = parse_plan("uniform:layer=0,keep=4", model.shape());  // deterministic per row
  // Sample 0 and the last sample unpruned, the others pruned; merged rows in reverse sample order.
  const size_t n = ds.samples.size();
  std::map<std::string, PlanGroup> groups;
  groups["none"] = PlanGroup{PruningPlan{}, {0, n - 1}};
  for (size_t i = 1; i + 1 < n; ++i) groups[pruned.to_string()].samples.push_back(i);
  groups[pruned.to_string()].plan = pruned;
  std::vector<size_t> order;
  for (size_t i = n; i-- > 0;) order.push_back(i);
  EvalOptions o;
  o.limit = 1;  // ignored: the groups name the samples
  std::vector<std::string> seen;
  const EvalReport merged = evaluate_plan_groups(model, model_hash, ds, o, groups, order, env, /*seed=*/3,
                                                 [&](const std::string& key, const EvalReport& rep) {
                                                   seen.push_back(key + ":" + std::to_string(rep.n_selected));
                                                 });
  EXPECT_EQ(seen, (std::vector<std::string>{"none:2", pruned.to_string() + ":" + std::to_string(n - 2)}));
  ASSERT_EQ(merged.rows.size(), n);
  EXPECT_EQ(merged.n_selected, n);
  EXPECT_EQ(merged.n_evaluated, n);
  EXPECT_EQ(merged.key.plan, "");
  double correct = 0;
  for (size_t j = 0; j < n; ++j) {
    const size_t i = order[j];
    EXPECT_EQ(merged.rows[j].id, ds.samples[i].id);
    // The reference: this sample alone under its plan.
    Dataset one = ds;
    one.samples = {ds.samples[i]};
    const bool unpruned = i == 0 || i == n - 1;
    const EvalReport alone =
        evaluate_plan(model, model_hash, one, EvalOptions{}, unpruned ? PruningPlan{} : pruned, env, 3);
    ASSERT_EQ(alone.rows.size(), 1u);
    EXPECT_EQ(merged.rows[j].result.prediction, alone.rows[0].result.prediction) << ds.samples[i].id;
    correct += alone.rows[0].score.score();
  }
  EXPECT_NEAR(merged.metrics.overall.accuracy(), correct / double(n), 1e-12);
}

}  // namespace
}  // namespace vispco::eval
