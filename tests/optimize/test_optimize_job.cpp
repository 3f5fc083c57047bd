// The optimize job (optimize/optimize.h) against an injected evaluator (no model): min-k, budget and grid
// choose what their rules say, the report's JSON and Markdown carry the figures, the test split is compared
// per family, bad options are one-line errors, and gnuplot draws the plots when it is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/errors.h"
#include "model/llava/presets.h"
#include "optimize/optimize.h"
#include "optimize/plan_flops.h"
#include "optimize/plan_template.h"
#include "optimize/plots.h"
#include "test_util.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;

// Accuracy = a function of (template, K); families "a" and "b" split the samples; prefill ms = 10 × the
// FLOPs ratio (an ideal engine). Counts how often each plan was evaluated.
class FakeEvaluator : public PlanEvaluator {
 public:
  using AccuracyFn = std::function<double(const std::string& tmpl, int64_t keep)>;
  explicit FakeEvaluator(AccuracyFn acc) : acc_(std::move(acc)) {
    cfg_ = preset_shape("tiny", 0);  // N_v = 16, L = 4
    lengths_ = {10, 12, 10, 14};
    families_ = {"a", "b", "a", "b"};
  }
  const ModelShape& shape() const override { return cfg_; }
  const std::vector<int64_t>& text_lengths(Split) const override { return lengths_; }
  EvalPoint evaluate(const PruningPlan& plan, Split split, const std::string& tmpl, int64_t param) override {
    plan.validate(cfg_);
    ++calls[std::string(split_name(split)) + " " + plan.to_string()];
    EvalPoint p;
    fill_plan_figures(p, plan, cfg_, split, lengths_, families_, tmpl, param);
    p.accuracy = plan.empty() ? acc_("none", 16) : acc_(tmpl, p.keep);
    if (split == Split::kTest) p.accuracy = std::max(0.0, p.accuracy - 0.01);
    p.n = lengths_.size();
    p.mean_prefill_ms = 10.0 * p.flops.llm;
    for (auto& [name, f] : p.per_family) {
      f.n = 2;
      f.accuracy = name == "a" ? p.accuracy : p.accuracy / 2;
      f.mean_prefill_ms = 10.0 * f.flops_ratio;
    }
    p.n_evaluated = p.n;
    return p;
  }
  std::map<std::string, int> calls;

 private:
  AccuracyFn acc_;
  ModelShape cfg_;
  std::vector<int64_t> lengths_;
  std::vector<std::string> families_;
};

OptimizeOptions min_k_opts(const std::string& tmpl, double eps) {
  OptimizeOptions o;
  o.method = "min-k";
  o.templates = {tmpl};
  o.epsilon = eps;
  return o;
}

TEST(OptimizeJob, MinKChoosesTheSearchAnswerAndComparesOnTest) {
  // fastv: accuracy rises linearly to 0.8 at K = 16: 0.05·K. ε = 10 % → threshold 0.72 → K = 15 (0.75).
  FakeEvaluator ev(
      [](const std::string& t, int64_t k) { return t == "none" ? 0.8 : 0.05 * static_cast<double>(k); });
  const OptimizeReport r = run_optimize(min_k_opts("fastv:layer=2", 0.1), ev);
  ASSERT_TRUE(r.search.chosen);
  const EvalPoint& c = r.search.points[*r.search.chosen];
  EXPECT_EQ(c.plan, "fastv:layer=2,keep=15");
  EXPECT_EQ(r.search.points[0].plan, "none");
  ASSERT_TRUE(r.test);
  EXPECT_NEAR(r.test->retention, (0.75 - 0.01) / (0.8 - 0.01), 1e-12);
  EXPECT_NEAR(r.test->prefill_speedup, 1.0 / c.flops.llm, 1e-9) << "ideal engine: speedup = 1 / FLOPs ratio";
  EXPECT_EQ(r.test->per_family.size(), 2u);
  EXPECT_EQ(ev.calls.at("test none"), 1);
  EXPECT_EQ(ev.calls.at("test fastv:layer=2,keep=15"), 1);
  for (const auto& [plan, n] : ev.calls) EXPECT_EQ(n, 1) << plan << " evaluated twice";
  const auto j = r.to_json();
  EXPECT_EQ(j["calibration"]["chosen_plan"], "fastv:layer=2,keep=15");
  EXPECT_EQ(j["details"]["chosen_keep"], 15);
  EXPECT_FALSE(j["details"]["rule"].get<std::string>().empty());
  ASSERT_EQ(j["flops_curves"].size(), 1u);
  const std::string md = r.to_markdown();
  EXPECT_NE(md.find("## min-K search"), std::string::npos);
  EXPECT_NE(md.find("**Rule.**"), std::string::npos);
  EXPECT_NE(md.find("`fastv:layer=2,keep=15` **(chosen)**"), std::string::npos) << md;
  EXPECT_NE(r.summary().find("retention"), std::string::npos);
}

TEST(OptimizeJob, MinKAnswerKeepingEveryTokenIsNoPlan) {
  // Only K = N_v = 16 is within ε (every smaller K loses half the accuracy): the search's answer prunes
  // nothing, so min-K chooses no plan — even though the ideal engine's time at K = 16 equals unpruned's.
  FakeEvaluator ev([](const std::string& t, int64_t k) { return t == "none" || k == 16 ? 0.8 : 0.4; });
  const OptimizeReport r = run_optimize(min_k_opts("fastv:layer=2", 0.05), ev);
  EXPECT_FALSE(r.search.chosen);
  EXPECT_NE(r.search.chosen_reason.find("K=16 keeps every visual token"), std::string::npos)
      << r.search.chosen_reason;
  EXPECT_EQ(ev.calls.count("test fastv:layer=2,keep=16"), 0u);  // nothing chosen: no test run of it
}

TEST(OptimizeJob, MinKReportsNonMonotonePoints) {
  // A dip at K = 12 (0.2) under a curve that is otherwise within ε from K = 8 on.
  const FakeEvaluator::AccuracyFn acc = [](const std::string& t, int64_t k) {
    if (t == "none") return 0.8;
    if (k == 12) return 0.2;
    return k >= 8 ? 0.8 : 0.1;
  };
  FakeEvaluator ev(acc);
  OptimizeOptions o = min_k_opts("fastv:layer=2", 0.05);
  o.evaluate_test = false;
  const OptimizeReport r = run_optimize(o, ev);
  // Probes: 16 in, C[7] = 8 in, 4 out, 6 out, 7 out → 8, the true answer; K = 12 never probed.
  EXPECT_EQ(r.search.points[*r.search.chosen].keep, 8);
  EXPECT_FALSE(r.test);
  // The same search with K = 12 known from the store reports the dip.
  class WithStore : public FakeEvaluator {
   public:
    using FakeEvaluator::FakeEvaluator;
    std::vector<std::string> complete_plans(Split) override {
      return {"fastv:layer=2,keep=12", "pool:layer=0,keep=4"};
    }
  } ev2(acc);
  const OptimizeReport r2 = run_optimize(o, ev2);
  EXPECT_EQ(r2.search.points[*r2.search.chosen].keep, 8);
  ASSERT_FALSE(r2.search.notes.empty());
  EXPECT_NE(r2.search.notes[0].find("K=12"), std::string::npos) << r2.search.notes[0];
  EXPECT_NE(r2.to_markdown().find("Monotonicity violations"), std::string::npos);
}

TEST(OptimizeJob, BudgetPicksTheMostAccurateCandidateWithinTheBudget) {
  // Accuracy = K/16, so the candidate that keeps the most tokens within the budget wins. The expected K of
  // each template comes from a brute-force scan of the FLOPs model here.
  FakeEvaluator ev(
      [](const std::string& t, int64_t k) { return t == "none" ? 1.0 : static_cast<double>(k) / 16.0; });
  OptimizeOptions o;
  o.method = "budget";
  o.templates = {"fastv:layer=1", "fastv:layer=2", "pool:layer=0"};
  o.flops_budget = 0.8;
  // The most accurate (largest K); on equal K the cheaper plan.
  std::string want_template;
  int64_t want_k = 0;
  double want_ratio = 2;
  for (const auto& t : o.templates) {
    const PlanTemplate pt = PlanTemplate::parse(t, ev.shape());
    for (int64_t k = 16; k >= 1; --k) {
      if (!pt.valid_at(k)) continue;
      const double ratio = plan_flops_ratio(pt.at(k), ev.shape(), ev.text_lengths(Split::kCalib)).llm;
      if (ratio > 0.8) continue;
      std::printf("%s: largest K within the budget %ld (FLOPs ratio %.4f)\n", t.c_str(), static_cast<long>(k),
                  ratio);
      if (k > want_k || (k == want_k && ratio < want_ratio))
        want_k = k, want_template = t, want_ratio = ratio;
      break;
    }
  }
  ASSERT_GT(want_k, 0);
  const OptimizeReport r = run_optimize(o, ev);
  ASSERT_TRUE(r.search.chosen);
  for (const auto& p : r.search.points)
    if (p.plan != "none") EXPECT_LE(p.flops.llm, 0.8) << p.plan;
  const EvalPoint& c = r.search.points[*r.search.chosen];
  EXPECT_EQ(c.template_text, want_template);
  EXPECT_EQ(c.keep, want_k);
  EXPECT_EQ(r.to_json()["details"]["candidates"].size(), 3u);
  // A budget nothing fits: no plan, a note per template, exit without a test evaluation.
  o.flops_budget = 0.01;
  FakeEvaluator ev2([](const std::string&, int64_t) { return 0.5; });
  const OptimizeReport none = run_optimize(o, ev2);
  EXPECT_FALSE(none.search.chosen);
  EXPECT_EQ(none.search.notes.size(), 3u);
  EXPECT_EQ(ev2.calls.count("test none"), 0u);
}

TEST(OptimizeJob, GridFrontierChosenPlanAndPreLlmRanking) {
  // divprune better than visionzip at every K; fastv the best but in-LLM; pool skips non-squares.
  FakeEvaluator ev([](const std::string& t, int64_t k) {
    const double x = static_cast<double>(k) / 16.0;
    if (t == "none") return 0.9;
    if (t == "fastv:layer=2") return std::min(0.9, 0.3 + x);
    if (t == "divprune:layer=0") return 0.2 + 0.6 * x;
    if (t == "visionzip:layer=0") return 0.1 + 0.6 * x;
    return 0.05 * x;  // pool
  });
  OptimizeOptions o;
  o.method = "grid";
  o.templates = {"fastv:layer=2", "visionzip:layer=0", "divprune:layer=0", "pool:layer=0"};
  o.keeps = {16, 12, 8, 4, 2};
  o.epsilon = 0.0;
  const OptimizeReport r = run_optimize(o, ev);
  EXPECT_EQ(r.search.points.size(), 1u + 3 * 5 + 2) << "the reference, 3 templates × 5 K, pool at 16 and 4";
  const auto& d = r.search.details;
  EXPECT_EQ(d["skipped"].size(), 3u) << d["skipped"].dump();  // pool at 12, 8, 2: not squares
  EXPECT_EQ(d["pre_llm"]["best"], "divprune:layer=0");
  // Frontier: non-dominated, cost ascending; chosen = the cheapest frontier point with accuracy ≥ 0.9.
  ASSERT_TRUE(r.search.chosen);
  const EvalPoint& c = r.search.points[*r.search.chosen];
  EXPECT_GE(c.accuracy, 0.9);
  EXPECT_EQ(c.template_text, "fastv:layer=2");
  EXPECT_EQ(c.keep, 12) << "0.3 + 12/16 ≥ 0.9 first at K = 12 (K = 8 gives 0.8)";
  for (const auto& p : r.search.points)
    if (p.accuracy >= 0.9) EXPECT_GE(p.flops.llm, c.flops.llm) << p.plan;
  const std::string md = r.to_markdown();
  EXPECT_NE(md.find("Best pre-LLM template: `divprune:layer=0`"), std::string::npos) << md;
  EXPECT_NE(md.find("✓"), std::string::npos);
}

TEST(OptimizeJob, BadOptionsAreErrorsNamingTheValue) {
  FakeEvaluator ev([](const std::string&, int64_t) { return 0.5; });
  OptimizeOptions o = min_k_opts("fastv:layer=2", 0.01);
  o.method = "anneal";
  try {
    run_optimize(o, ev);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown method 'anneal' (valid: min-k, budget, grid)"),
              std::string::npos)
        << e.what();
  }
  o = min_k_opts("fastv:layer=2", 1.5);
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument);
  o = min_k_opts("pool:layer=0", 0.01);
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument) << "min-k needs every K";
  o = min_k_opts("pdrop:layers=1/2", 0.01);
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument) << "a ratio template has no K";
  o.method = "budget";
  o.flops_budget = 0;
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument);
  o = min_k_opts("fastv:layer=2", 0.01);
  o.k_max = 17;
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument);
  o.method = "grid";
  o.k_max = 0;
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument) << "grid without K values";
}

TEST(OptimizeJob, OptionsJsonRoundTrip) {
  OptimizeOptions o;
  o.method = "grid";
  o.templates = {"fastv:layer=2", "pool:layer=0"};
  o.keeps = {16, 4};
  o.epsilon = 0.02;
  o.epsilon_absolute = true;
  o.k_step = 2;
  o.evaluate_test = false;
  EXPECT_EQ(optimize_options_from_json(to_json(o)), o);
  EXPECT_THROW(optimize_options_from_json({{"method", "grid"}, {"nope", 1}}), InvalidArgument);
}

TEST(OptimizeJob, PlotsAreDrawnWithGnuplot) {
  try {
    check_gnuplot();
  } catch (const IoError& e) {
    GTEST_SKIP() << e.what();
  }
  FakeEvaluator ev(
      [](const std::string& t, int64_t k) { return t == "none" ? 0.8 : 0.05 * static_cast<double>(k); });
  OptimizeOptions o;
  o.method = "grid";
  o.templates = {"fastv:layer=2", "visionzip:layer=0"};
  o.keeps = {16, 8, 4};
  OptimizeReport r = run_optimize(o, ev);
  testing::TempDir tmp;
  r.plots = write_plots(r, tmp.str("report"));
  EXPECT_EQ(r.plots, (std::vector<std::string>{
                         "plots/accuracy_vs_flops.png", "plots/accuracy_vs_k_fastv_layer_2.png",
                         "plots/accuracy_vs_k_visionzip_layer_0.png", "plots/prefill_vs_k.png"}));
  for (const auto& p : r.plots) {
    const auto path = fs::path(tmp.str("report")) / p;
    ASSERT_TRUE(fs::exists(path)) << p;
    EXPECT_EQ(testing::read_file(path).substr(1, 3), "PNG") << p;
  }
  write_report(r, tmp.str("report"));
  EXPECT_NE(testing::read_file(fs::path(tmp.str("report")) / "optimize.md").find("![plots/prefill_vs_k.png]"),
            std::string::npos);
  EXPECT_THROW(check_gnuplot("/nonexistent/gnuplot"), IoError);
  try {
    check_gnuplot("vispco-no-such-gnuplot");
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vispco::optimize
