// min-K on a real accuracy curve: the tiny random model, a dataset whose answers are the unpruned model's own
// greedy outputs (reference accuracy 1), FastV at ℓ = 2 evaluated exhaustively at every K = 1..16 through the
// result store; the binary search through ModelPlanEvaluator must give the exhaustive answer wherever being
// within ε is monotone, and a boundary by its rule elsewhere. Also: store hits and misses, complete plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/eval_fixture.h"
#include "eval/run_key.h"
#include "optimize/min_k.h"
#include "optimize/optimize.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plan_template.h"
#include "optimize/self_answered.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;

using testing::self_answered;

// The tiny model with the self-answered dataset as both splits, and a fresh folder for the result store.
class OptimizeTiny : public ::testing::Test {
 protected:
  VisionLanguageModel model = testing::load_tiny();
  const std::string hash = eval::model_folder_hash(testing::tiny_model_dir());
  const eval::Dataset ds = eval::load_dataset(self_answered().dir.string());
  testing::TempDir tmp;
  /// A result store in tmp; the other settings at their defaults.
  ModelEvalSettings settings() const {
    ModelEvalSettings st;
    st.store_path = tmp.str("store.sqlite");
    return st;
  }
};

TEST_F(OptimizeTiny, BinarySearchMatchesTheExhaustiveCurveOfARealModel) {
  ModelEvalSettings st = settings();
  st.batch_size = 4;
  ModelPlanEvaluator ev(model, hash, ds, ds, st);
  const PlanTemplate t = PlanTemplate::parse("fastv:layer=2", model.shape());

  const EvalPoint ref = ev.evaluate(PruningPlan{}, Split::kCalib);
  EXPECT_DOUBLE_EQ(ref.accuracy, 1.0) << "answers are the unpruned outputs";
  EXPECT_EQ(ref.n_evaluated, 12u);
  std::map<int64_t, double> curve;
  std::string shown;
  for (int64_t k = 1; k <= 16; ++k) {
    const EvalPoint p = ev.evaluate(t.at(k), Split::kCalib, t.text(), k);
    EXPECT_EQ(p.n_evaluated, 12u) << "first time: a store miss for every sample";
    EXPECT_EQ(p.keep, k);
    curve[k] = p.accuracy;
    shown += " " + std::to_string(k) + ":" + std::to_string(p.accuracy).substr(0, 5);
  }
  std::printf("tiny fastv:layer=2 accuracy by K:%s\n", shown.c_str());
  EXPECT_DOUBLE_EQ(curve[16], 1.0) << "keeping all 16 tokens is the unpruned model";

  for (const double eps : {0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 0.9}) {
    MinKOptions o;
    o.k_min = 1;
    o.k_max = 16;
    o.epsilon = eps;
    size_t fresh = 0;
    const MinKResult r = min_k_search(
        [&](int64_t k) {
          const EvalPoint p = ev.evaluate(t.at(k), Split::kCalib, t.text(), k);
          fresh += p.n_evaluated;
          EXPECT_EQ(p.n_from_store, 12u) << "every probe is a store hit after the scan";
          return p.accuracy;
        },
        ref.accuracy, o);
    EXPECT_EQ(fresh, 0u);
    const double thr = r.threshold - 1e-12;
    int64_t exhaustive = -1;
    bool monotone = true, in = false;
    for (const auto& [k, a] : curve) {
      if (a >= thr) {
        if (exhaustive < 0) exhaustive = k;
        in = true;
      } else if (in) {
        monotone = false;
      }
    }
    ASSERT_TRUE(r.chosen) << "K = 16 is always within ε";
    if (monotone) {
      EXPECT_EQ(*r.chosen, exhaustive) << "ε " << eps;
    } else {
      std::printf("ε %.2f: within-ε set not monotone; search gives the boundary K=%ld (exhaustive %ld)\n",
                  eps, static_cast<long>(*r.chosen), static_cast<long>(exhaustive));
      EXPECT_GE(curve[*r.chosen], thr);
      if (*r.chosen > 1) EXPECT_LT(curve[*r.chosen - 1], thr);
    }
    for (const auto& p : r.probes) EXPECT_DOUBLE_EQ(p.accuracy, curve.at(p.keep));
  }
}

TEST_F(OptimizeTiny, StoreHitsMissesAndCompletePlans) {
  ModelEvalSettings st = settings();
  st.limit_calib = 8;
  st.limit_test = 5;
  std::vector<std::string> lines;
  st.log = [&](const std::string& l) { lines.push_back(l); };
  ModelPlanEvaluator ev(model, hash, ds, ds, st);
  EXPECT_EQ(ev.text_lengths(Split::kCalib).size(), 8u);
  EXPECT_EQ(ev.text_lengths(Split::kTest).size(), 5u);
  EXPECT_TRUE(ev.complete_plans(Split::kCalib).empty());
  const auto plan = parse_plan("fastv:layer=2,keep=4", 16);
  const EvalPoint test5 = ev.evaluate(plan, Split::kTest);  // the first 5 samples: 5 misses
  EXPECT_EQ(test5.n_evaluated, 5u);
  EXPECT_TRUE(ev.complete_plans(Split::kCalib).empty()) << "5 of the 8 calibration samples only";
  EXPECT_EQ(ev.complete_plans(Split::kTest), (std::vector<std::string>{"fastv:layer=2,keep=4"}));
  const EvalPoint calib8 = ev.evaluate(plan, Split::kCalib);  // 5 hits, 3 misses
  EXPECT_EQ(calib8.n_from_store, 5u);
  EXPECT_EQ(calib8.n_evaluated, 3u);
  const EvalPoint again = ev.evaluate(plan, Split::kCalib);
  EXPECT_EQ(again.n_evaluated, 0u);
  EXPECT_EQ(again.n_from_store, 8u);
  EXPECT_DOUBLE_EQ(again.accuracy, calib8.accuracy);
  EXPECT_EQ(ev.complete_plans(Split::kCalib), (std::vector<std::string>{"fastv:layer=2,keep=4"}));
  EXPECT_EQ(lines.size(), 3u);
  EXPECT_NE(lines.back().find("8 stored"), std::string::npos) << lines.back();
  // Per-family figures add up to the overall ones.
  double weighted = 0;
  size_t n = 0;
  for (const auto& [name, f] : again.per_family) {
    weighted += f.accuracy * static_cast<double>(f.n);
    n += f.n;
    EXPECT_LT(f.flops_ratio, 1.0);
  }
  EXPECT_EQ(n, 8u);
  EXPECT_NEAR(weighted / 8.0, again.accuracy, 1e-12);
  EXPECT_GT(again.mean_prefill_ms, 0.0);
}

TEST_F(OptimizeTiny, ConfidenceBoundsNeverChooseASmallerK) {
  ModelEvalSettings st = settings();
  st.batch_size = 4;
  ModelPlanEvaluator ev(model, hash, ds, ds, st);
  OptimizeOptions o;
  o.method = "min-k";
  o.templates = {"fastv:layer=2"};
  o.epsilon = 0.3;
  o.evaluate_test = false;
  o.min_speedup = 0;  // the speed rule reads measured times; this test is about the bound
  const auto point = run_optimize(o, ev);
  o.confidence = 0.9;
  const auto bound = run_optimize(o, ev);
  ASSERT_TRUE(point.search.chosen) << point.search.chosen_reason;
  const auto& p = point.search.points[*point.search.chosen];
  std::printf("point estimate: %s; bound: %s\n", point.search.chosen_reason.c_str(),
              bound.search.chosen_reason.c_str());
  if (!bound.search.chosen)  // the bound's answer is K = N_v: no pruning plan, every token kept (≥ p.keep)
    EXPECT_NE(bound.search.chosen_reason.find("K=16 keeps every visual token"), std::string::npos)
        << bound.search.chosen_reason;
  const auto& b = bound.search.chosen ? bound.search.points[*bound.search.chosen] : bound.search.points[0];
  EXPECT_GE(b.keep, p.keep);
  if (bound.search.chosen && b.plan != "none") {
    ASSERT_TRUE(b.loss_bound.has_value());
    // Recomputed here from the per-sample scores: reference accuracy 1, so the loss is the share of misses.
    const size_t lost = std::count(b.scores.begin(), b.scores.end(), 0.0);
    EXPECT_EQ(b.loss_bound->lost, lost);
    EXPECT_NEAR(b.loss_bound->loss, double(lost) / 12.0, 1e-12);
    EXPECT_LE(b.loss_bound->upper, 0.3 + 1e-12) << "within ε by the bound";
    EXPECT_GE(b.loss_bound->upper, b.loss_bound->loss);
  }
  EXPECT_NE(bound.to_markdown().find("confidence bound"), std::string::npos);
  o.method = "budget";
  o.flops_budget = 0.5;
  EXPECT_THROW(o.validate(), InvalidArgument) << "budget has no ε";
}

}  // namespace
}  // namespace vispco::optimize
