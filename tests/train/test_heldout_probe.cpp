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
  const std::vector<std::pair<std::string, int>> want = {{"decoder-pool4", 2}, {"decoder", 4}, {"decoder", 5}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["stage"], want[i].first);
    EXPECT_EQ(lines[i]["decoder_step"], want[i].second);
    EXPECT_EQ(lines[i]["n"], 8);
    EXPECT_EQ(lines[i]["accuracy"].size(), 8u);
  }
  EXPECT_EQ(lines[2]["step"], 3);
}

TEST(HeldoutProbe, AGateBelowItsAccuracyStopsTheRunForGood) {
  auto r = testing_micro::micro_recipe();
  r.vision.steps = 1;
  r.decoder.steps = 4;
  r.decoder.batch = 1;
  r.probe_every = 2;
  r.probe_per_family = 1;
  r.probe_gates = {{.decoder_step = 1, .min_accuracy = 0.0}, {.decoder_step = 2, .min_accuracy = 1.0}};
  testing::TempDir tmp;
  {
    Trainer t(r, tmp.str("run"), RunContext{});
    // A random micro model answers 8 SynthVQA questions nowhere near all correctly: the second gate fails at
    // the probe of decoder step 2 (the first, at 0 %, passes).
    EXPECT_FALSE(t.run(0));
    EXPECT_FALSE(t.done());
    EXPECT_NE(t.stopped_by_probe().find("below the gate 1.000 at step 2"), std::string::npos) << t.stopped_by_probe();
  }
  std::ifstream in(tmp.path() / "run" / "probe.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 1u) << "stopped at the first probe";
  EXPECT_EQ(lines[0]["decoder_step"], 2);
  EXPECT_TRUE(lines[0].contains("stopped"));
  // The same command resumes into the stop: no further step, no further probe.
  Trainer again(r, tmp.str("run"), RunContext{});
  EXPECT_FALSE(again.stopped_by_probe().empty());
  EXPECT_FALSE(again.run(0));
  std::ifstream in2(tmp.path() / "run" / "probe.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in2, line);) ++n;
  EXPECT_EQ(n, 1u);
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
