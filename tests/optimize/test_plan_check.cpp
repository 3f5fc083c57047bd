// The constraints of issue 46 on constructed per-sample results (no model): the per-family rule rejects a
// plan whose overall loss passes while one family fails (point estimates and Bonferroni-joint Clopper–Pearson
// bounds, checked against values computed independently with an exact binomial sum in /usr/bin/python3);
// the speed rule drops plans whose stored prefill time is not faster than unpruned (grid and min-k) and
// flags FLOPs-model disagreement; the plots' data blocks carry 95 % Wilson intervals (checked against
// python3's); the coverage experiment applies the per-family rule.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "model/llava/presets.h"
#include "optimize/epsilon_coverage.h"
#include "optimize/optimize.h"
#include "optimize/plan_check.h"
#include "optimize/plots.h"

namespace vispco::optimize {
namespace {

// A constructed result store: per plan text, each sample's score and the plan's mean prefill time (ms).
// Samples 0–99 are family "color", 100–199 "text"; every prompt has 10 text tokens.
class StoredEvaluator : public PlanEvaluator {
 public:
  struct Stored {
    std::vector<double> scores;
    double prefill_ms = 10;
  };
  explicit StoredEvaluator(std::map<std::string, Stored> store) : store_(std::move(store)) {
    cfg_ = preset_shape("tiny", 0);  // N_v = 16
    for (int i = 0; i < 200; ++i) {
      lengths_.push_back(10);
      families_.push_back(i < 100 ? "color" : "text");
    }
  }
  const ModelShape& shape() const override { return cfg_; }
  const std::vector<int64_t>& text_lengths(Split) const override { return lengths_; }
  EvalPoint evaluate(const PruningPlan& plan, Split split, const std::string& tmpl, int64_t param) override {
    EvalPoint p;
    fill_plan_figures(p, plan, cfg_, split, lengths_, families_, tmpl, param);
    const auto it = store_.find(p.plan);
    const Stored s = it != store_.end() ? it->second : Stored{std::vector<double>(200, 0.0), 1.0};
    p.scores = s.scores;
    p.families = families_;
    p.n = 200;
    p.mean_prefill_ms = s.prefill_ms;
    double sum = 0;
    std::map<std::string, double> fam;
    for (size_t i = 0; i < 200; ++i) sum += s.scores[i], fam[families_[i]] += s.scores[i];
    p.accuracy = sum / 200;
    for (auto& [name, f] : p.per_family) {
      f.n = 100;
      f.accuracy = fam[name] / 100;
      f.mean_prefill_ms = s.prefill_ms;
    }
    return p;
  }

 private:
  std::map<std::string, Stored> store_;
  ModelShape cfg_;
  std::vector<int64_t> lengths_;
  std::vector<std::string> families_;
};

// All right, except `text_lost` text samples (the first ones of the family).
std::vector<double> losing_text(int text_lost) {
  std::vector<double> s(200, 1.0);
  for (int i = 0; i < text_lost; ++i) s[100 + i] = 0.0;
  return s;
}

std::map<std::string, StoredEvaluator::Stored> family_store() {
  return {{"none", {losing_text(0), 10.0}},
          {"divprune:layer=0,keep=4", {losing_text(16), 3.0}},   // overall loss 0.08, text 0.16
          {"divprune:layer=0,keep=8", {losing_text(2), 5.0}},    // overall 0.01, text 0.02
          {"divprune:layer=0,keep=12", {losing_text(0), 7.0}}};  // no loss
}

OptimizeOptions grid_opts() {
  OptimizeOptions o;
  o.method = "grid";
  o.templates = {"divprune:layer=0"};
  o.keeps = {4, 8, 12};
  o.epsilon = 0.15;
  o.evaluate_test = false;
  return o;
}

TEST(PlanCheck, OneFailingFamilyRejectsAPlanWhoseOverallLossPasses) {
  StoredEvaluator ev(family_store());
  OptimizeOptions o = grid_opts();
  // Without the per-family rule the cheapest plan wins: its overall loss 0.08 is within ε = 0.15.
  OptimizeReport r = run_optimize(o, ev);
  ASSERT_TRUE(r.search.chosen);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=4");
  // With E = 0.1 per family (point estimates): K = 4 keeps its overall ε but text loses 0.16 > 0.1.
  o.epsilon_per_family = 0.1;
  r = run_optimize(o, ev);
  ASSERT_TRUE(r.search.chosen);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=8");
  const PlanCheck& k4 = r.search.checks.at(1);
  EXPECT_EQ(r.search.points[1].plan, "divprune:layer=0,keep=4");
  EXPECT_TRUE(k4.within_epsilon);
  EXPECT_NEAR(k4.loss, 0.08, 1e-12);
  EXPECT_FALSE(k4.families_within);
  EXPECT_FALSE(k4.acceptable());
  EXPECT_EQ(k4.worst_family, "text");
  EXPECT_NEAR(k4.families.at("text").loss, 0.16, 1e-12);
  EXPECT_NEAR(k4.families.at("text").limit, 0.1, 1e-12);
  EXPECT_TRUE(k4.families.at("color").within);
  bool noted = false;
  for (const auto& n : r.search.notes)
    noted = noted || n.find("rejected by a family: `divprune:layer=0,keep=4`") == 0;
  EXPECT_TRUE(noted);
  const std::string md = r.to_markdown();
  EXPECT_NE(md.find("text **(worst)**"), std::string::npos) << md;
  EXPECT_NE(md.find("family text loss 0.1600 > E limit 0.1000"), std::string::npos) << md;

  // With the 0.9 bound: overall K = 4 bound U(16 of 200) at 0.95 (Bonferroni over lost/gained; nothing
  // gained) = 0.1189717743 ≤ 0.15, still passes; text's bound at 1 − 0.1/2 (two families) → each side 0.975:
  // U(16 of 100) = 0.2467875974 > 0.1. K = 8: text U(2 of 100) = 0.0703839325, color U(0 of 100) =
  // 0.0362166926. Reference values: /usr/bin/python3, bisection on Σ_k≤x C(m,k) q^k (1−q)^(m−k) = 1 − c.
  o.confidence = 0.9;
  r = run_optimize(o, ev);
  ASSERT_TRUE(r.search.chosen);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=8");
  const PlanCheck& b4 = r.search.checks.at(1);
  ASSERT_TRUE(b4.bound);
  EXPECT_NEAR(b4.bound->upper, 0.1189717743, 1e-8);
  EXPECT_TRUE(b4.within_epsilon);
  EXPECT_NEAR(b4.family_confidence, 0.95, 1e-12);
  EXPECT_NEAR(b4.families.at("text").compared, 0.2467875974, 1e-8);
  EXPECT_FALSE(b4.families_within);
  const PlanCheck& b8 = r.search.checks.at(2);
  EXPECT_NEAR(b8.families.at("text").compared, 0.0703839325, 1e-8);
  EXPECT_NEAR(b8.families.at("color").compared, 0.0362166926, 1e-8);
  EXPECT_TRUE(b8.acceptable());
  EXPECT_EQ(b8.worst_family, "text");

  // A family below min_family_n is named and not checked: K = 4 then passes.
  o.min_family_n = 101;
  r = run_optimize(o, ev);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=4");
  EXPECT_EQ(r.search.checks.at(1).too_few, (std::vector<std::string>{"color", "text"}));
  bool named = false;
  for (const auto& n : r.search.notes)
    named = named || n == "family text has too few calibration samples for the "
                          "per-family rule: not checked";
  EXPECT_TRUE(named);
}

TEST(PlanCheck, APlanNotFasterThanUnprunedIsNotChosen) {
  auto store = family_store();
  store["divprune:layer=0,keep=4"].prefill_ms = 10.5;  // within ε, but slower than unpruned (10 ms)
  store["divprune:layer=0,keep=8"].prefill_ms = 10.0;  // exactly as fast: not faster either
  StoredEvaluator ev(store);
  OptimizeOptions o = grid_opts();
  OptimizeReport r = run_optimize(o, ev);
  ASSERT_TRUE(r.search.chosen);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=12");
  EXPECT_NEAR(r.search.checks.at(1).measured_speedup, 10.0 / 10.5, 1e-12);
  EXPECT_FALSE(r.search.checks.at(1).faster);
  EXPECT_FALSE(r.search.checks.at(2).faster);
  EXPECT_TRUE(r.search.checks.at(3).faster);
  std::vector<std::string> dropped;
  for (const auto& n : r.search.notes)
    if (n.rfind("dropped for speed: ", 0) == 0) dropped.push_back(n);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_NE(dropped[0].find("`divprune:layer=0,keep=4`"), std::string::npos) << dropped[0];
  EXPECT_NE(dropped[0].find("measured prefill 0.95× (not faster than unpruned)"), std::string::npos)
      << dropped[0];
  // FLOPs model vs measurement: K = 12's FLOPs speedup is 1 / its ratio; measured 10 / 7. The flag follows
  // the stated factor.
  const PlanCheck& k12 = r.search.checks.at(3);
  const double flops_speedup = 1.0 / r.search.points[3].flops.llm;
  EXPECT_NEAR(k12.flops_speedup, flops_speedup, 1e-12);
  EXPECT_EQ(k12.timing_disagrees, flops_speedup / (10.0 / 7.0) > 2.0);
  const double k4_flops_speedup = 1.0 / r.search.points[1].flops.llm;
  EXPECT_EQ(r.search.checks.at(1).timing_disagrees, k4_flops_speedup / (10.0 / 10.5) > 2.0);
  // Off: the cheapest plan again.
  o.min_speedup = 0;
  r = run_optimize(o, ev);
  EXPECT_EQ(r.search.points[*r.search.chosen].plan, "divprune:layer=0,keep=4");

  // min-k: its answer (the smallest K within ε) is slower than unpruned → no plan, and the reason says so.
  std::map<std::string, StoredEvaluator::Stored> mk;
  for (int k = 1; k <= 16; ++k)
    mk["divprune:layer=0,keep=" + std::to_string(k)] = {losing_text(k >= 10 ? 0 : 100), 12.0};
  mk["none"] = {losing_text(0), 10.0};
  StoredEvaluator ev2(mk);
  OptimizeOptions m;
  m.method = "min-k";
  m.templates = {"divprune:layer=0"};
  m.epsilon = 0.05;
  const OptimizeReport none = run_optimize(m, ev2);
  EXPECT_FALSE(none.search.chosen);
  EXPECT_EQ(none.search.details["chosen_keep"], 10) << "the search's answer before the speed rule";
  EXPECT_NE(none.search.chosen_reason.find("K=10 meets ε but measured prefill 0.83×"), std::string::npos)
      << none.search.chosen_reason;
  EXPECT_FALSE(none.test) << "nothing to evaluate on test";
  mk["divprune:layer=0,keep=10"].prefill_ms = 6.0;
  StoredEvaluator ev3(mk);
  const OptimizeReport ten = run_optimize(m, ev3);
  ASSERT_TRUE(ten.search.chosen);
  EXPECT_EQ(ten.search.points[*ten.search.chosen].keep, 10);
}

TEST(PlanCheck, TimingAgainstTheFlopsModelIsFlaggedBeyondTheStatedFactor) {
  EvalPoint ref, plan;
  ref.plan = "none", ref.mean_prefill_ms = 10, ref.flops.llm = 1;
  plan.plan = "divprune:layer=0,keep=4", plan.mean_prefill_ms = 9, plan.flops.llm = 0.1;  // 1.11× vs 10×
  ConstraintOptions o;
  o.epsilon = 0.5;
  PlanCheck c = check_plan(o, ref, plan);
  EXPECT_NEAR(c.measured_speedup, 10.0 / 9.0, 1e-12);
  EXPECT_NEAR(c.flops_speedup, 10.0, 1e-12);
  EXPECT_TRUE(c.timing_disagrees);
  EXPECT_TRUE(c.faster);
  plan.mean_prefill_ms = 2, plan.flops.llm = 0.25;  // 5× vs 4×: within 2×
  c = check_plan(o, ref, plan);
  EXPECT_FALSE(c.timing_disagrees);
  o.timing_factor = 1.2;  // 4 / 5 = 0.8 < 1 / 1.2
  EXPECT_TRUE(check_plan(o, ref, plan).timing_disagrees);
  plan.mean_prefill_ms = 0;  // not measured: not faster, and nothing to compare
  c = check_plan(o, ref, plan);
  EXPECT_FALSE(c.faster);
  EXPECT_FALSE(c.timing_disagrees);
  EXPECT_EQ(c.rejection(), "prefill not measured");
  o.min_speedup = 0;
  EXPECT_TRUE(check_plan(o, ref, plan).faster) << "the rule off";
}

// Rows of the inline data block `$name << EOD … EOD` of a gnuplot script.
std::vector<std::vector<double>> data_block(const std::string& script, const std::string& name) {
  std::istringstream in(script);
  std::string line;
  std::vector<std::vector<double>> rows;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "$" + name + " << EOD") {
      inside = true;
      continue;
    }
    if (inside && line == "EOD") break;
    if (inside) {
      std::istringstream ls(line);
      std::vector<double> row;
      for (double v; ls >> v;) row.push_back(v);
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(Plots, AccuracyPointsCarryTheirWilsonIntervalAndTheTestPoint) {
  OptimizeReport r;
  r.options = grid_opts();
  r.n_visual = 16;
  EvalPoint ref, a, b;
  ref.plan = "none", ref.template_text = "none", ref.param = 16, ref.n = 200, ref.accuracy = 0.9,
  ref.flops.llm = 1;
  a.plan = "divprune:layer=0,keep=4", a.template_text = "divprune:layer=0", a.param = 4, a.n = 200;
  a.accuracy = 0.45, a.flops.llm = 0.3;
  a.per_family["text"] = {100, 0.5, 0, 0.3};
  b = a;
  b.plan = "divprune:layer=0,keep=8", b.param = 8, b.n = 100, b.accuracy = 0.8, b.flops.llm = 0.5;
  b.per_family["text"] = {40, 0.85, 0, 0.5};
  r.search.points = {ref, a, b};
  r.search.frontier = {1, 2, 0};
  r.search.chosen = 2;
  TestComparison t;
  t.reference = ref;
  t.chosen = b;
  t.chosen.accuracy = 0.5;  // on test: 0.5 of 100
  r.test = t;
  std::map<std::string, std::string> scripts;
  for (const auto& [name, gp] : plot_scripts(r)) scripts[name] = gp;
  // Wilson 95 % (z = 1.959964) from /usr/bin/python3: d = 1 + z²/n, centre (p + z²/2n)/d,
  // half-width z·sqrt(p(1−p)/n + z²/4n²)/d.
  const std::vector<std::vector<double>> want_t0 = {{0.3, 0.45, 0.3826406835, 0.5192438492},
                                                    {0.5, 0.8, 0.7111708336, 0.8666330671}};
  const auto t0 = data_block(scripts.at("accuracy_vs_flops"), "t0");
  ASSERT_EQ(t0.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t c = 0; c < 4; ++c)
      EXPECT_NEAR(t0[i][c], want_t0[i][c], 1e-7) << "row " << i << " column " << c;
  const auto refb = data_block(scripts.at("accuracy_vs_flops"), "ref");
  ASSERT_EQ(refb.size(), 1u);
  EXPECT_NEAR(refb[0][2], 0.8505941871, 1e-7);
  EXPECT_NEAR(refb[0][3], 0.9343295515, 1e-7);
  // The chosen plan on test, beside its calibration point: 0.5 of 100 → [0.4038315296, 0.5961684704].
  const auto tc = data_block(scripts.at("accuracy_vs_flops"), "test_chosen");
  ASSERT_EQ(tc.size(), 1u);
  EXPECT_NEAR(tc[0][0], 0.5 + 0.015, 1e-9);
  EXPECT_NEAR(tc[0][1], 0.5, 1e-12);
  EXPECT_NEAR(tc[0][2], 0.4038315296, 1e-7);
  EXPECT_NEAR(tc[0][3], 0.5961684704, 1e-7);
  EXPECT_NE(scripts.at("accuracy_vs_flops").find("using 1:2:3:4 with yerrorbars"), std::string::npos);
  // Per family in accuracy vs K: text at K = 8 is 0.85 of 40 → [0.7092767550, 0.9293881232].
  const std::string& k_plot = scripts.at("accuracy_vs_k_divprune_layer_0");
  const auto f0 = data_block(k_plot, "f0");
  ASSERT_EQ(f0.size(), 2u);
  EXPECT_NEAR(f0[1][0], 8, 1e-12);
  EXPECT_NEAR(f0[1][2], 0.7092767550, 1e-7);
  EXPECT_NEAR(f0[1][3], 0.9293881232, 1e-7);
  const auto kt = data_block(k_plot, "test_chosen");
  ASSERT_EQ(kt.size(), 1u);
  EXPECT_NEAR(kt[0][0], 8 * 1.08, 1e-9);
  EXPECT_NEAR(kt[0][2], 0.4038315296, 1e-7);
}

TEST(EpsilonCoverage, ThePerFamilyRuleRefusesTheRungThatBreaksAFamily) {
  // 2000 samples, 10 % in family "b"; unpruned all right. Rung 0 (K = 8) loses every second b sample: 5 %
  // overall, 50 % in b. Rung 1 (K = 16) loses nothing. Test = the pool.
  LadderTable t;
  t.ladder = {8, 16, 32};
  for (size_t i = 0; i < 2000; ++i) {
    const bool b = i % 10 == 0;
    t.ids.push_back(std::to_string(i));
    t.families.push_back(b ? "b" : "a");
    t.score.push_back({b && i % 20 == 0 ? 0.0 : 1.0, 1.0, 1.0});
    t.agree.push_back({1, 1, 1});
    t.llm_flops.push_back({1, 2, 4});
  }
  CoverageOptions o;
  o.n_calib = 500;
  o.draws = 200;
  o.epsilon = 0.08;
  o.confidence = 0.9;
  o.min_family_n = 20;
  const auto overall_only = epsilon_coverage(t, t, o);
  EXPECT_NEAR(overall_only.rungs[0].test_loss, 0.05, 1e-12);
  EXPECT_FALSE(overall_only.rungs[0].test_violates);
  EXPECT_GT(overall_only.rungs[0].chosen_point, 190u) << "the point rule takes rung 0 on almost every draw";
  EXPECT_NEAR(overall_only.rungs[0].flops_ratio, 0.25, 1e-12);
  o.epsilon_per_family = 0.1;
  const auto fam = epsilon_coverage(t, t, o);
  EXPECT_TRUE(fam.rungs[0].test_family_violates);
  EXPECT_EQ(fam.rungs[0].test_worst_family, "b");
  EXPECT_FALSE(fam.rungs[1].test_family_violates);
  // ~50 b samples a draw, half lost: the point estimate of b's loss is never ≤ 0.1 here.
  EXPECT_EQ(fam.rungs[0].chosen_point, 0u);
  EXPECT_EQ(fam.mean_keep_point, 16.0);
  EXPECT_EQ(fam.rungs[0].chosen_bound, 0u);
  // The bound also refuses rung 1 when a draw holds few b samples: no loss in n of them bounds the loss by
  // 1 − 0.025^(1/n) at the families' 0.95 (two families), above E = 0.1 for n ≤ 35. Those draws fall back to
  // the unpruned rung (K = 32).
  EXPECT_GE(fam.mean_keep_bound, 16.0);
  EXPECT_EQ(fam.rungs[1].chosen_bound + fam.rungs[2].chosen_bound, 200u);
  EXPECT_EQ(fam.family_violation_rate_point, 0.0);
  EXPECT_EQ(fam.family_violation_rate_bound, 0.0);
  EXPECT_NEAR(fam.mean_flops_point, 0.5, 1e-12);
  o.with_replacement = true;
  o.n_calib = 5000;  // larger than the pool: fine with replacement
  o.draws = 5;
  EXPECT_NO_THROW(epsilon_coverage(t, t, o));
}

TEST(PairedLossInterval, TwoOneSidedBoundsAtHalfTheLevelEach) {
  // 6 lost, 2 gained of 100. Each end is a one-sided paired bound at 0.975, i.e. Clopper–Pearson bounds at
  // 1 − 0.025/2 = 0.9875: upper = U(6 of 100) − L(2 of 100), lower = −(U(2) − L(6)).
  std::vector<double> ref(100, 1.0), plan(100, 1.0);
  for (int i = 0; i < 6; ++i) plan[i] = 0.0;
  for (int i = 90; i < 92; ++i) ref[i] = 0.0;
  const LossInterval i = paired_loss_interval(ref, plan, 0.95);
  EXPECT_NEAR(i.loss, 0.04, 1e-12);
  EXPECT_NEAR(i.upper, clopper_pearson_upper(6, 100, 0.9875) - clopper_pearson_lower(2, 100, 0.9875), 1e-12);
  EXPECT_NEAR(i.lower, -(clopper_pearson_upper(2, 100, 0.9875) - clopper_pearson_lower(6, 100, 0.9875)),
              1e-12);
  EXPECT_LT(i.lower, i.loss);
  EXPECT_GT(i.upper, i.loss);
}

}  // namespace
}  // namespace vispco::optimize
