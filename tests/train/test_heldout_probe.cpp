// Tests of the held-out probe: its answers are the evaluator's on the same generated SynthVQA scenes, its
// accuracies are the hand count of matches, and the trainer logs one line per probe step into probe.jsonl.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "eval/synthvqa/generator.h"
#include "model/tiny_model.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"
#include "test_util.h"
#include "train/heldout_probe.h"
#include "train/micro_recipe.h"
#include "train/trainer.h"

namespace vispco::train {
namespace {

TEST(HeldoutProbe, AnswersAsTheEvaluatorDoesOnTheSameScenes) {
  auto m = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const ProbeResult p = heldout_probe(m, 31, 2, /*batch=*/5);  // 16 samples, batches of 5, 5, 5, 1
  ASSERT_EQ(p.n, 16);
  ASSERT_EQ(p.predictions.size(), 16u);
  testing::TempDir tmp;
  eval::synthvqa::generate_synthvqa({.seed = 31, .count = 16, .n_threads = 1}, tmp.str("ds"));
  const auto ds = eval::load_dataset(tmp.str("ds"));
  const auto rep = eval::evaluate(m, "tiny", ds, eval::EvalOptions{});
  std::map<std::string, std::pair<int, int>> hits;  // family → (correct, n), counted by hand
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(p.predictions[i], rep.rows[i].result.prediction) << "sample " << i;
    auto& [c, n] = hits[ds.samples[i].family];
    c += eval::normalize_answer(p.predictions[i]) == eval::normalize_answer(ds.samples[i].answer);
    ++n;
  }
  ASSERT_EQ(p.accuracy.size(), 8u);
  for (const auto& [family, cn] : hits) {
    EXPECT_EQ(cn.second, 2) << family;
    EXPECT_DOUBLE_EQ(p.accuracy.at(family), cn.first / 2.0) << family;
  }
  EXPECT_THROW(heldout_probe(m, 31, 0), InvalidArgument);
}

// With a pruning hook (the HR trainer's base-view gate) the probe answers as the evaluator does under the
// same plan, and the plan is really applied: keeping 1 of the visual tokens changes some answer of the
// unpruned probe.
TEST(HeldoutProbe, WithAHookAnswersAsTheEvaluatorUnderThatPlan) {
  auto m = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const auto plan = BoundPlan::bind("uniform:layer=0,keep=1", m.shape(), {});
  const ProbeSource source{eval::synthvqa::make_sample, 8};
  const auto hook = plan.hook();
  const ProbeResult p = heldout_probe(m, 31, 2, /*batch=*/5, source, hook.get());
  ASSERT_EQ(p.predictions.size(), 16u);
  testing::TempDir tmp;
  eval::synthvqa::generate_synthvqa({.seed = 31, .count = 16, .n_threads = 1}, tmp.str("ds"));
  const auto ds = eval::load_dataset(tmp.str("ds"));
  eval::EvalOptions opts;
  opts.plan = plan.key();
  const auto eval_hook = plan.hook();
  const auto rep = eval::evaluate(m, "tiny", ds, opts, eval_hook.get());
  for (size_t i = 0; i < 16; ++i)
    EXPECT_EQ(p.predictions[i], rep.rows[i].result.prediction) << "sample " << i;
  const ProbeResult unpruned = heldout_probe(m, 31, 2, /*batch=*/5, source);
  EXPECT_NE(p.predictions, unpruned.predictions);
}

TEST(HeldoutProbe, TrainerLogsEveryProbeStepAndTheEndOfEachDecoderStage) {
  auto r = testing_micro::micro_recipe();
  r.vision.steps = 1;
  r.lowres = {{.steps = 2, .batch = 1, .pool = 4}};
  r.decoder.steps = 3;
  r.decoder.batch = 1;
  r.probe_every = 2;
  r.probe_per_family = 1;
  testing::TempDir tmp;
  Trainer t(r, tmp.str("run"), RunContext{});
  while (!t.done()) t.step();
  std::ifstream in(tmp.path() / "run" / "probe.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  // pool4 stage: step 2 (= its end); decoder stage: step 2, then its end at 3.
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::pair<std::string, int>> want = {
      {"decoder-pool4", 2}, {"decoder", 4}, {"decoder", 5}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["stage"], want[i].first);
    EXPECT_EQ(lines[i]["decoder_step"], want[i].second);
    EXPECT_EQ(lines[i]["n"], 8);
    EXPECT_EQ(lines[i]["accuracy"].size(), 8u);
  }
  EXPECT_EQ(lines[2]["step"], 3);
}

TEST(HeldoutProbe, AGateStopsOnlyWhenTheNextProbeConfirmsIt) {
  const std::vector<ProbeGate> gates = {{.decoder_step = 1500, .min_accuracy = 0.4},
                                        {.decoder_step = 3850, .min_accuracy = 0.7}};
  // Recipe 11's probes: 0.453 at 1250 (no gate yet), 0.211 at 1500 (below 0.4: pending, no stop), 0.500 at
  // 1750 (above: cleared).
  auto v = check_probe_gates(gates, 1000, 1250, 0.453, std::nullopt);
  EXPECT_FALSE(v.pending);
  EXPECT_TRUE(v.stop.empty());
  v = check_probe_gates(gates, 1250, 1500, 0.211, std::nullopt);
  ASSERT_TRUE(v.pending);
  EXPECT_EQ(v.pending->gate, gates[0]);
  EXPECT_EQ(v.pending->failed_at, 1500);
  EXPECT_TRUE(v.stop.empty());
  const auto after_dip = v.pending;
  v = check_probe_gates(gates, 1500, 1750, 0.500, after_dip);
  EXPECT_FALSE(v.pending);
  EXPECT_TRUE(v.stop.empty());
  // Below the bar again at the next probe: stop, naming both probes.
  v = check_probe_gates(gates, 1500, 1750, 0.350, after_dip);
  EXPECT_FALSE(v.pending);
  EXPECT_NE(
      v.stop.find("0.350 at decoder step 1750 is below the gate 0.400 at step 1500, as was 0.211 at decoder "
                  "step 1500"),
      std::string::npos)
      << v.stop;
  // A gate between two probes applies to the first probe after it; a probe that misses two gates keeps the
  // higher bar pending; a probe that clears one pending gate can fail the next gate.
  v = check_probe_gates(gates, 1000, 4000, 0.3, std::nullopt);
  ASSERT_TRUE(v.pending);
  EXPECT_EQ(v.pending->gate, gates[1]);
  v = check_probe_gates(gates, 3750, 4000, 0.5, after_dip);
  ASSERT_TRUE(v.pending);
  EXPECT_EQ(v.pending->gate, gates[1]);
  EXPECT_TRUE(v.stop.empty());
  // A gate already checked by an earlier probe does not apply again.
  EXPECT_FALSE(check_probe_gates(gates, 1500, 1750, 0.1, std::nullopt).pending);
}

TEST(HeldoutProbe, AConfirmedGateStopsTheRunForGoodAndAPendingOneSurvivesAResume) {
  auto r = testing_micro::micro_recipe();
  r.vision.steps = 1;
  r.decoder.steps = 8;
  r.decoder.batch = 1;
  r.probe_every = 2;
  r.probe_per_family = 1;
  r.probe_gates = {{.decoder_step = 1, .min_accuracy = 0.0}, {.decoder_step = 2, .min_accuracy = 1.0}};
  testing::TempDir tmp;
  {
    Trainer t(r, tmp.str("run"), RunContext{});
    // A random micro model answers 8 SynthVQA questions nowhere near all correctly: the second gate fails at
    // the probe of decoder step 2 (the first, at 0 %, passes) and is pending; interrupted there.
    for (int i = 0; i < 3; ++i) t.step();  // the vision step and two decoder steps
    EXPECT_TRUE(t.stopped_by_probe().empty());
    t.save_checkpoint();
  }
  {
    Trainer t(r, tmp.str("run"), RunContext{});  // resumed: the probe at step 4 confirms the pending gate
    EXPECT_FALSE(t.run(0));
    EXPECT_FALSE(t.done());
    EXPECT_NE(t.stopped_by_probe().find("at decoder step 4 is below the gate 1.000 at step 2"),
              std::string::npos)
        << t.stopped_by_probe();
  }
  std::ifstream in(tmp.path() / "run" / "probe.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << "stopped at the second probe";
  EXPECT_EQ(lines[0]["decoder_step"], 2);
  EXPECT_EQ(lines[0]["gate_pending"]["min_accuracy"], 1.0);
  EXPECT_FALSE(lines[0].contains("stopped"));
  EXPECT_EQ(lines[1]["decoder_step"], 4);
  EXPECT_TRUE(lines[1].contains("stopped"));
  // The same command resumes into the stop: no further step, no further probe.
  Trainer again(r, tmp.str("run"), RunContext{});
  EXPECT_FALSE(again.stopped_by_probe().empty());
  EXPECT_FALSE(again.run(0));
  std::ifstream in2(tmp.path() / "run" / "probe.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in2, line);) ++n;
  EXPECT_EQ(n, 2u);
  // Gates that pass let the run finish.
  r.probe_gates = {{.decoder_step = 2, .min_accuracy = 0.0}};
  Trainer passing(r, tmp.str("run2"), RunContext{});
  EXPECT_TRUE(passing.run(0));
  EXPECT_TRUE(passing.stopped_by_probe().empty());
}

TEST(HeldoutProbe, GatesRoundTripAndNeedTheProbe) {
  auto r = testing_micro::micro_recipe();
  r.probe_every = 100;
  r.probe_gates = {{.decoder_step = 500, .min_accuracy = 0.4}};
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["probe_every"] = 0;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["probe_gates"][0]["min_accuracy"] = 1.5;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["probe_gates"][0]["step"] = 3;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
