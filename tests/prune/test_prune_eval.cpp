// A pruning plan through the evaluator: predictions equal generate() under the same plan, the report counts
// the kept tokens, and the plan's canonical text keys the result store (pruned and unpruned results never
// mix).
#include <gtest/gtest.h>

#include "eval/dataset.h"
#include "eval/eval_fixture.h"
#include "eval/evaluator.h"
#include "eval/run_key.h"
#include "io/image.h"
#include "model/generate.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

TEST(PruneEval, PlanPredictionsMatchGenerateAndKeyTheStore) {
  auto m = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const auto hash = eval::model_folder_hash(testing::tiny_model_dir());
  const auto ds = eval::load_dataset(testing::known_dataset().dir.string());
  testing::TempDir tmp;
  eval::EvalOptions o;
  o.store_path = tmp.str("store.sqlite");
  o.batch_size = 3;
  const auto plan = parse_plan("fastv:layer=2,keep=4", 16);
  o.plan = plan.to_string();
  PlanHook hook(plan, m.shape());
  const auto pruned = eval::evaluate(m, hash, ds, o, &hook);
  EXPECT_EQ(pruned.key.plan, "fastv:layer=2,keep=4");
  EXPECT_DOUBLE_EQ(pruned.mean_n_visual_kept, 4.0);
  EXPECT_DOUBLE_EQ(pruned.mean_n_visual, 16.0);
  // Each prediction equals a direct generate() under the same plan.
  for (size_t i = 0; i < ds.samples.size(); ++i) {
    const auto& smp = ds.samples[i];
    VlmRequest req{m.preprocess(io::load_image_rgb(smp.image_path)), m.prompt_ids(smp.question)};
    PlanHook h1(plan, m.shape());
    auto gc = o.generation;
    auto direct = generate(m, {req}, gc, &h1);
    EXPECT_EQ(pruned.rows[i].result.prediction, direct.texts[0]) << smp.id;
  }
  // The unpruned run in the same store is evaluated afresh, not read from the pruned rows.
  eval::EvalOptions none = o;
  none.plan = "none";
  const auto full = eval::evaluate(m, hash, ds, none);
  EXPECT_EQ(full.n_evaluated, ds.samples.size());
  EXPECT_DOUBLE_EQ(full.mean_n_visual_kept, 16.0);
}

}  // namespace
}  // namespace vispco
