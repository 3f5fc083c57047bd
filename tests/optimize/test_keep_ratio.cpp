// Keep-ratio plan templates (issue 47: "fastv:layer=2,keep={P}%", P in ‰ of each image's own N_v) and the
// searches over them against an injected evaluator whose accuracy is a known step in P: template parsing,
// param_text and at(p), --keep-as, grid's --keep parsing, and min-k / grid / budget choosing what a hand
// computation says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/flops.h"
#include "model/llava/presets.h"
#include "model/n_visual_varies.h"
#include "optimize/optimize.h"
#include "optimize/plan_flops.h"
#include "optimize/plan_template.h"

namespace vispco::optimize {
namespace {

// The tiny LLaVA shape (N_v = 16, L = 4) under the name of a family whose images make their own N_v.
ModelShape varying_shape() {
  ModelShape s = preset_shape("tiny", 0);
  s.architecture = "Qwen2VLForConditionalGeneration";
  return s;
}

TEST(KeepRatioTemplate, ParsesPrintsAndMakesPlans) {
  const ModelShape shape = varying_shape();
  const PlanTemplate t = PlanTemplate::parse("fastv:layer=2,keep={P}%", shape);
  EXPECT_EQ(t.param(), TemplateParam::kKeepPercent);
  EXPECT_EQ(t.param_min(), 1);
  EXPECT_EQ(t.param_max(), 1000);
  EXPECT_EQ(t.param_name(), "keep ratio");
  EXPECT_EQ(t.param_text(250), "25.0%");
  EXPECT_EQ(t.param_text(5), "0.5%");
  EXPECT_EQ(t.param_text(1000), "100.0%");
  EXPECT_EQ(t.param_text(253), "25.3%");
  // 25.3 % of the nominal 16 tokens is 4.048 → K 4; 37.5 % is 6 exactly; 0.1 % is 0.016 → at least 1.
  const PruningPlan a = t.at(253);
  ASSERT_EQ(a.stages.size(), 1u);
  EXPECT_DOUBLE_EQ(a.stages[0].keep_percent, 25.3);
  EXPECT_EQ(a.stages[0].keep, 4);
  EXPECT_EQ(a.stages[0].layer, 2);
  EXPECT_EQ(a.to_string(), "fastv:layer=2,keep=25.3%");
  EXPECT_EQ(t.at(375).stages[0].keep, 6);
  EXPECT_EQ(t.at(1).stages[0].keep, 1);
  EXPECT_EQ(t.at(1000).to_string(), "fastv:layer=2,keep=100%");
  EXPECT_THROW(t.at(0), InvalidArgument);
  EXPECT_THROW(t.at(1001), InvalidArgument);
  // Per image, the plan resolves its own K: 25.3 % of 250 tokens is 63.25 → 63, of 6 tokens 1.518 → 2.
  EXPECT_EQ(resolve_keep(a.stages[0], 250), 63);
  EXPECT_EQ(resolve_keep(a.stages[0], 6), 2);

  // Several stages share the ratio wherever {P} stands.
  const PlanTemplate two = PlanTemplate::parse("fastv:layer=1,keep={P}%+fastv:layer=3,keep={P}%", shape);
  EXPECT_EQ(two.param(), TemplateParam::kKeepPercent);
  EXPECT_EQ(two.at(500).to_string(), "fastv:layer=1,keep=50%+fastv:layer=3,keep=50%");
  EXPECT_FALSE(two.pre_llm());
  EXPECT_TRUE(PlanTemplate::parse("divprune:keep={P}%", shape).pre_llm());

  for (const char* bad : {"fastv:layer=2,keep={P}", "fastv:layer=2,keep={P}%+fastv:layer=3,keep={K}",
                          "fastv:layer=9,keep={P}%", "nosuch:layer=0,keep={P}%"})
    EXPECT_THROW(PlanTemplate::parse(bad, shape), InvalidArgument) << bad;
}

TEST(KeepRatioTemplate, KeepAsTurnsOneStageTemplatesIntoRatios) {
  const ModelShape varying = varying_shape(), fixed = preset_shape("tiny", 0);
  EXPECT_TRUE(n_visual_varies(varying));
  EXPECT_FALSE(n_visual_varies(fixed)) << "LLaVA-1.5";
  EXPECT_EQ(apply_keep_as("fastv:layer=2", KeepAs::kRatio, fixed), "fastv:layer=2,keep={P}%");
  EXPECT_EQ(apply_keep_as("divprune", KeepAs::kRatio, fixed), "divprune:keep={P}%");
  EXPECT_EQ(apply_keep_as("fastv:layer=2", KeepAs::kAuto, varying), "fastv:layer=2,keep={P}%");
  EXPECT_EQ(apply_keep_as("fastv:layer=2", KeepAs::kAuto, fixed), "fastv:layer=2") << "LLaVA-1.5: counts";
  EXPECT_EQ(apply_keep_as("fastv:layer=2", KeepAs::kCount, varying), "fastv:layer=2");
  // Templates that place K or P themselves, several stages and PyramidDrop stay as given.
  for (const char* same : {"fastv:layer=2,keep={K}", "fastv:layer=2,keep={P}%", "pdrop:layers=1/2",
                           "fastv:layer=1,keep=8+fastv:layer=3,keep={K}"})
    EXPECT_EQ(apply_keep_as(same, KeepAs::kRatio, varying), same);
  EXPECT_EQ(parse_keep_as("ratio"), KeepAs::kRatio);
  EXPECT_THROW(parse_keep_as("percent"), InvalidArgument);
}

TEST(KeepRatioTemplate, GridKeepListTakesCountsAndShares) {
  const auto [counts, ratios] = parse_grid_keeps("64,32,25%,12.5%,100%,0.1%");
  EXPECT_EQ(counts, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(ratios, (std::vector<int64_t>{250, 125, 1000, 1}));
  for (const char* bad : {"12.55%", "x%", "%", "25.%", "-5%", "64,,32"})
    EXPECT_THROW(parse_grid_keeps(bad), InvalidArgument) << bad;
  GridSearchOptions g;
  g.keep_ratios = {0};
  EXPECT_THROW(g.validate(), InvalidArgument);
  g.keep_ratios = {1001};
  EXPECT_THROW(g.validate(), InvalidArgument);
}

// Accuracy = a function of (template, parameter); every sample one family "a"; prefill ms = 10 × the FLOPs
// ratio (an ideal engine, so every pruned plan is faster).
class RatioEvaluator : public PlanEvaluator {
 public:
  using AccuracyFn = std::function<double(const std::string& tmpl, int64_t param)>;
  RatioEvaluator(ModelShape shape, AccuracyFn acc) : shape_(std::move(shape)), acc_(std::move(acc)) {}
  const ModelShape& shape() const override { return shape_; }
  const std::vector<int64_t>& text_lengths(Split) const override { return lengths_; }
  EvalPoint evaluate(const PruningPlan& plan, Split split, const std::string& tmpl, int64_t param) override {
    plan.validate(shape_);
    ++n_calls;
    EvalPoint p;
    fill_plan_figures(p, plan, shape_, split, lengths_, families_, tmpl, param);
    p.accuracy = plan.empty() ? acc_("none", 0) : acc_(tmpl, param);
    p.n = lengths_.size();
    p.mean_prefill_ms = 10.0 * p.flops.llm;
    for (auto& [name, f] : p.per_family) f = {p.n, p.accuracy, p.mean_prefill_ms, p.flops.llm};
    return p;
  }
  int n_calls = 0;

 private:
  ModelShape shape_;
  AccuracyFn acc_;
  std::vector<int64_t> lengths_ = {10, 12, 10, 14};
  std::vector<std::string> families_ = {"a", "a", "a", "a"};
};

// Unpruned 0.8; a keep ratio of at least 37.5 % keeps it, anything less drops to 0.5. With ε = 1 % the
// threshold is 0.792, so the smallest keep ratio within ε is 375 ‰.
double step_at_375(const std::string& tmpl, int64_t p) {
  if (tmpl == "none") return 0.8;
  EXPECT_EQ(tmpl, "fastv:layer=2,keep={P}%");
  return p >= 375 ? 0.8 : 0.5;
}

// FLOPs per image (issue 47): with one FlopsSpec per prompt, each image keeps its share of its own N_v (a
// count at most its N_v), and the ratio is of the sums over the prompts — here against token counts worked by
// hand and the cost model's prefill_flops (cost/flops.h) per prompt.
TEST(KeepRatioFlops, EachImageIsCostedAtItsOwnTokens) {
  const ModelShape shape = varying_shape();  // nominal N_v 16, L 4
  FlopsSpec small = shape.flops;
  small.n_visual_tokens = 8;
  small.vision_layers /= 2;
  const auto llm = [&](const FlopsSpec& spec, std::vector<int64_t> tokens) {
    const auto p = prefill_flops(spec, tokens);
    return static_cast<double>(p.decoder_total + p.lm_head);
  };
  // keep=25 % from layer 2: the 8-token image keeps 2, the 16-token one 4; texts of 10 and 12 tokens.
  const auto r =
      plan_flops_ratio(parse_plan("fastv:layer=2,keep=25%", shape), shape, {10, 12}, {small, shape.flops});
  const double plan = llm(small, {18, 18, 12, 12}) + llm(shape.flops, {28, 28, 16, 16});
  const double full = llm(small, {18, 18, 18, 18}) + llm(shape.flops, {28, 28, 28, 28});
  EXPECT_NEAR(r.llm, plan / full, 1e-12);
  // Nominal costing (no specs) prices both images at 16 tokens: another figure.
  EXPECT_GT(
      std::abs(plan_flops_ratio(parse_plan("fastv:layer=2,keep=25%", shape), shape, {10, 12}).llm - r.llm),
      1e-3);
  // A count above an image's N_v keeps all of it: K = 12 on the 8-token image is unpruned there.
  const auto c = plan_flops_ratio(parse_plan("fastv:layer=2,keep=12", shape), shape, {10}, {small});
  EXPECT_DOUBLE_EQ(c.llm, 1.0);
  EXPECT_THROW(plan_flops_ratio(parse_plan("fastv:layer=2,keep=12", shape), shape, {10, 12}, {small}),
               InvalidArgument);
}

TEST(KeepRatioSearch, MinKBinarySearchFindsTheSmallestRatioWithinEpsilon) {
  RatioEvaluator ev(varying_shape(), step_at_375);
  OptimizeOptions o;
  o.method = "min-k";
  o.templates = {"fastv:layer=2"};  // keep_as auto + a varying N_v → a keep-ratio template
  o.epsilon = 0.01;
  const OptimizeReport r = run_optimize(o, ev);
  EXPECT_EQ(r.options.templates, std::vector<std::string>{"fastv:layer=2,keep={P}%"});
  ASSERT_TRUE(r.search.chosen);
  const EvalPoint& c = r.search.points[*r.search.chosen];
  EXPECT_EQ(c.plan, "fastv:layer=2,keep=37.5%");
  EXPECT_EQ(c.param, 375);
  EXPECT_DOUBLE_EQ(c.keep_ratio, 0.375);
  EXPECT_EQ(c.keep, 6) << "37.5 % of the nominal N_v = 16";
  // FLOPs at the nominal N_v: the ratio plan costs what the count plan with K = 6 costs.
  EXPECT_DOUBLE_EQ(c.flops.llm, plan_flops_ratio(parse_plan("fastv:layer=2,keep=6", ev.shape()), ev.shape(),
                                                 ev.text_lengths(Split::kCalib))
                                    .llm);
  const auto j = r.to_json();
  EXPECT_EQ(j["details"]["chosen_keep"], 375);
  EXPECT_EQ(j["details"]["param"], "keep ratio");
  EXPECT_EQ(j["details"]["n_candidates"], 1000);
  EXPECT_EQ(j["options"]["keep_as"], "auto");
  // Binary search over 1000 candidates: k_max first, then ⌈log₂ 1000⌉ = 10 halvings at most.
  EXPECT_LE(j["details"]["probes"].size(), 11u);
  EXPECT_GE(j["details"]["probes"].size(), 10u);
  EXPECT_NE(r.search.chosen_reason.find("keep 37.5% is the search's answer"), std::string::npos)
      << r.search.chosen_reason;
  const std::string md = r.to_markdown();
  EXPECT_NE(md.find("| probe | keep ratio | accuracy | within ε |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 37.5% | 0.8000 | yes |"), std::string::npos) << md;
  EXPECT_NE(md.find("37.5% (K 6)"), std::string::npos) << md;
  EXPECT_NE(md.find("nominal image's N_v = 16"), std::string::npos) << md;
}

TEST(KeepRatioSearch, MinKRangeIsInPermilleAndCountsStayCounts) {
  {  // k_min 400 ‰: the step lies below the range, so the smallest candidate is the answer.
    RatioEvaluator ev(varying_shape(), step_at_375);
    OptimizeOptions o;
    o.templates = {"fastv:layer=2"};
    o.k_min = 400;
    o.k_step = 100;  // candidates 400, 500, …, 1000
    const OptimizeReport r = run_optimize(o, ev);
    ASSERT_TRUE(r.search.chosen);
    EXPECT_EQ(r.search.points[*r.search.chosen].plan, "fastv:layer=2,keep=40%");
    o.k_max = 1001;
    EXPECT_THROW(run_optimize(o, ev), InvalidArgument) << "ratios stop at 1000 ‰";
  }
  {  // --keep-as count on the same model: the template varies K (accuracy by K: 6 of 16 tokens is 37.5 %).
    RatioEvaluator ev(varying_shape(), [](const std::string& t, int64_t k) {
      return t == "none" ? 0.8 : (k >= 6 ? 0.8 : 0.5);
    });
    OptimizeOptions o;
    o.templates = {"fastv:layer=2"};
    o.keep_as = "count";
    const OptimizeReport r = run_optimize(o, ev);
    ASSERT_TRUE(r.search.chosen);
    EXPECT_EQ(r.search.points[*r.search.chosen].plan, "fastv:layer=2,keep=6");
    EXPECT_EQ(r.to_json()["details"]["param"], "K");
    o.keep_as = "sometimes";
    EXPECT_THROW(run_optimize(o, ev), InvalidArgument);
  }
}

TEST(KeepRatioSearch, GridAndBudgetVaryTheRatio) {
  RatioEvaluator ev(varying_shape(), step_at_375);
  OptimizeOptions o;
  o.method = "grid";
  o.templates = {"fastv:layer=2"};
  o.keep_ratios = {1000, 500, 375, 250, 125};
  const OptimizeReport g = run_optimize(o, ev);
  ASSERT_TRUE(g.search.chosen);
  EXPECT_EQ(g.search.points.size(), 6u);
  EXPECT_EQ(g.search.points[*g.search.chosen].plan, "fastv:layer=2,keep=37.5%") << "cheapest within ε";
  o.keep_ratios.clear();
  o.keeps = {8, 4};
  EXPECT_THROW(run_optimize(o, ev), InvalidArgument) << "counts for a ratio template";

  // Budget: the largest keep ratio whose FLOPs ratio (at the nominal N_v) is within 0.85. Costed as the count
  // plan of its nominal K, so the answer's K is the largest K within the budget (found here by K plans), and
  // its ratio the largest ‰ still rounding to that K.
  OptimizeOptions b;
  b.method = "budget";
  b.templates = {"fastv:layer=2"};
  b.flops_budget = 0.85;
  const OptimizeReport br = run_optimize(b, ev);
  ASSERT_TRUE(br.search.chosen);
  const EvalPoint& c = br.search.points[*br.search.chosen];
  int64_t k_best = 0;
  for (int64_t k = 1; k <= 16; ++k)
    if (plan_flops_ratio(parse_plan("fastv:layer=2,keep=" + std::to_string(k), ev.shape()), ev.shape(),
                         ev.text_lengths(Split::kCalib))
            .llm <= 0.85)
      k_best = k;
  ASSERT_GT(k_best, 0);
  EXPECT_EQ(c.keep, k_best);
  // K rounds up from (K + 0.5)/16 on, so the largest ‰ still rounding to K is ⌈1000·(K + 0.5)/16⌉ − 1.
  const int64_t p_best = (1000 * (2 * k_best + 1) + 31) / 32 - 1;
  EXPECT_EQ(c.param, p_best) << c.plan;
}

}  // namespace
}  // namespace vispco::optimize
