// FLOPs-budget search (optimize/budget.h) and plan FLOPs (optimize/plan_flops.h): tokens per layer by hand,
// the ratio against cost/flops.h sums, bisection on synthetic costs (largest fitting value; never over the
// budget, even when the cost is not monotone), and budget plans of K, pool (K = s²) and PyramidDrop
// templates.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.h"
#include "cost/flops.h"
#include "model/llava/presets.h"
#include "optimize/budget.h"
#include "optimize/plan_flops.h"
#include "optimize/plan_template.h"
#include "prune/scorer.h"

namespace vispco::optimize {
namespace {

const ModelShape& tiny() {
  static const ModelShape s = preset_shape("tiny", 0);
  return s;
}  // N_v = 16, L = 4

TEST(PlanFlops, TokensPerLayerByHand) {
  // fastv at ℓ = 2 keeps 4 of 16: layers 0, 1 see 10 + 16 = 26, layers 2, 3 see 10 + 4 = 14.
  EXPECT_EQ(plan_tokens_per_layer(parse_plan("fastv:layer=2,keep=4", 16), tiny(), 10),
            (std::vector<int64_t>{26, 26, 14, 14}));
  // Before the LLM, then again after layer 2 (ℓ = 3).
  EXPECT_EQ(plan_tokens_per_layer(parse_plan("divprune:layer=0,keep=8+fastv:layer=3,keep=2", 16), tiny(), 5),
            (std::vector<int64_t>{13, 13, 13, 7}));
  EXPECT_EQ(plan_tokens_per_layer(PruningPlan{}, tiny(), 7), (std::vector<int64_t>(4, 23)));
  EXPECT_THROW(plan_tokens_per_layer(parse_plan("fastv:layer=0,keep=4", 16), tiny(), 5), InvalidArgument);
  EXPECT_THROW(plan_tokens_per_layer(PruningPlan{}, tiny(), -1), InvalidArgument);
}

TEST(PlanFlops, RatioIsTheRatioOfSumsOverPrompts) {
  const auto plan = parse_plan("fastv:layer=2,keep=4", 16);
  const std::vector<int64_t> lengths{10, 12, 10};
  double num = 0, den = 0, vision = 0;
  for (const int64_t n : lengths) {
    const auto p = prefill_flops(tiny().flops, {n + 16, n + 16, n + 4, n + 4});
    const auto u = prefill_flops(tiny().flops, {n + 16, n + 16, n + 16, n + 16});
    num += static_cast<double>(p.decoder_total + p.lm_head);
    den += static_cast<double>(u.decoder_total + u.lm_head);
    vision += static_cast<double>(p.vision + p.projector);
  }
  const FlopsRatio r = plan_flops_ratio(plan, tiny(), lengths);
  EXPECT_DOUBLE_EQ(r.llm, num / den);
  EXPECT_DOUBLE_EQ(r.with_vision, (num + vision) / (den + vision));
  EXPECT_DOUBLE_EQ(r.mean_llm_flops, num / 3);
  EXPECT_LT(r.llm, 1.0);
  EXPECT_GT(r.with_vision, r.llm) << "the unpruned tower dilutes the saving";
  EXPECT_DOUBLE_EQ(plan_flops_ratio(PruningPlan{}, tiny(), lengths).llm, 1.0);
  EXPECT_THROW(plan_flops_ratio(plan, tiny(), {}), InvalidArgument);
}

TEST(Bisection, FindsTheLargestFittingValueOfAMonotoneCost) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> params;
    for (int64_t p = 1 + rng() % 5; params.size() < 1 + rng() % 300; p += 1 + rng() % 4) params.push_back(p);
    std::vector<double> cost(params.size());
    double c = (rng() % 100) / 1000.0;
    for (auto& v : cost) v = (c += (rng() % 20) / 1000.0);  // non-decreasing
    std::map<int64_t, double> by_param;
    for (size_t i = 0; i < params.size(); ++i) by_param[params[i]] = cost[i];
    const double budget = (rng() % 1200) / 1000.0;
    const Bisection b = largest_within_budget(
        params, [&](int64_t p) { return by_param.at(p); }, budget);
    int64_t want = -1;
    for (size_t i = 0; i < params.size(); ++i)
      if (cost[i] <= budget) want = params[i];
    ASSERT_EQ(b.best.value_or(-1), want) << "trial " << trial;
    EXPECT_LE(b.evaluated.size(), 3 + static_cast<size_t>(std::ceil(std::log2(params.size() + 1.0))));
  }
}

TEST(Bisection, NeverExceedsTheBudgetEvenForANonMonotoneCost) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int64_t> params;
    for (int64_t p = 1; p <= 1 + static_cast<int64_t>(rng() % 200); ++p) params.push_back(p);
    std::map<int64_t, double> cost;
    for (auto p : params) cost[p] = (rng() % 1000) / 1000.0;
    const double budget = (rng() % 1000) / 1000.0;
    const Bisection b = largest_within_budget(
        params, [&](int64_t p) { return cost.at(p); }, budget);
    if (b.best) {
      EXPECT_LE(cost.at(*b.best), budget) << "trial " << trial;
    }
  }
  EXPECT_THROW(largest_within_budget(
                   {}, [](int64_t) { return 0.0; }, 0.5),
               InvalidArgument);
  EXPECT_THROW(largest_within_budget(
                   {3, 2}, [](int64_t) { return 0.0; }, 0.5),
               InvalidArgument);
}

// For a template: the plan fits, and the next valid parameter does not (the plan is the largest that fits).
void expect_tight(const PlanTemplate& t, const std::vector<int64_t>& lengths, double budget) {
  const BudgetPlan bp = budget_plan(t, tiny(), lengths, budget);
  if (!bp.plan) {
    for (int64_t p = t.param_min(); p <= t.param_max(); ++p)
      if (t.valid_at(p)) {
        EXPECT_GT(plan_flops_ratio(t.at(p), tiny(), lengths).llm, budget) << t.text() << " at " << p;
        break;
      }
    return;
  }
  EXPECT_LE(bp.flops.llm, budget) << t.text();
  EXPECT_DOUBLE_EQ(bp.flops.llm, plan_flops_ratio(*bp.plan, tiny(), lengths).llm);
  for (int64_t p = *bp.param + 1; p <= t.param_max(); ++p)
    if (t.valid_at(p)) {
      EXPECT_GT(plan_flops_ratio(t.at(p), tiny(), lengths).llm, budget) << t.text() << " at " << p;
      break;
    }
}

TEST(BudgetPlan, KPoolAndPyramidDropTemplatesStayWithinEveryBudget) {
  const std::vector<int64_t> lengths{9, 14, 21};
  for (const char* text : {"fastv:layer=2", "fastv:layer=1", "divprune:layer=0", "pool:layer=0",
                           "pdrop:layers=1/2/3", "fastv:layer=1,keep={K}+random:layer=3,keep=1"}) {
    const PlanTemplate t = PlanTemplate::parse(text, tiny());
    for (double b = 0.05; b <= 1.0; b += 0.05) expect_tight(t, lengths, b);
    expect_tight(t, lengths, 1.0);
  }
}

TEST(BudgetPlan, PoolOnlyTakesSquaresAndTinyBudgetsFitNothing) {
  const PlanTemplate pool = PlanTemplate::parse("pool:layer=0", tiny());
  const BudgetPlan bp = budget_plan(pool, tiny(), {10}, 0.6);
  ASSERT_TRUE(bp.param);
  EXPECT_TRUE(*bp.param == 1 || *bp.param == 4 || *bp.param == 9 || *bp.param == 16) << *bp.param;
  const PlanTemplate fastv = PlanTemplate::parse("fastv:layer=3", tiny());
  const BudgetPlan none = budget_plan(fastv, tiny(), {10}, 0.01);
  EXPECT_FALSE(none.plan);
  EXPECT_GT(none.smallest_ratio, 0.01);
  EXPECT_THROW(budget_plan(fastv, tiny(), {10}, 0.0), InvalidArgument);
  EXPECT_THROW(budget_plan(fastv, tiny(), {10}, 1.5), InvalidArgument);
}

TEST(PlanTemplate, ParsesKAndRatioTemplatesAndRejectsBadOnes) {
  const PlanTemplate f = PlanTemplate::parse("fastv:layer=2", tiny());
  EXPECT_EQ(f.param(), TemplateParam::kKeep);
  EXPECT_EQ(f.param_max(), 16);
  EXPECT_FALSE(f.pre_llm());
  EXPECT_EQ(f.at(5).to_string(), "fastv:layer=2,keep=5");
  const PlanTemplate p = PlanTemplate::parse("pdrop:layers=1/2", tiny());
  EXPECT_EQ(p.param(), TemplateParam::kPdropRatio);
  EXPECT_EQ(p.at(500).to_string(), "fastv:layer=1,keep=8+fastv:layer=2,keep=4");
  EXPECT_EQ(p.param_text(500), "0.500");
  EXPECT_TRUE(PlanTemplate::parse("visionzip:layer=0", tiny()).pre_llm());
  EXPECT_THROW(PlanTemplate::parse("fastv:layer=0", tiny()), InvalidArgument);
  EXPECT_THROW(PlanTemplate::parse("fastv:layer=2,keep=4", tiny()), InvalidArgument);
  EXPECT_THROW(PlanTemplate::parse("nosuch:layer=0", tiny()), InvalidArgument);
  EXPECT_THROW(PlanTemplate::parse("fastv:layer=9", tiny()), InvalidArgument);
  EXPECT_THROW(f.at(17), InvalidArgument);
  std::string why;
  EXPECT_FALSE(PlanTemplate::parse("pool:layer=0", tiny()).valid_at(5, &why));
  EXPECT_NE(why.find("square"), std::string::npos) << why;
  EXPECT_EQ(split_templates(" fastv:layer=2; pool:layer=0;;"),
            (std::vector<std::string>{"fastv:layer=2", "pool:layer=0"}));
  EXPECT_EQ(default_layer("fastv"), 2);
  EXPECT_EQ(default_layer("visionzip"), 0);
  EXPECT_THROW(default_layer("nosuch"), InvalidArgument);
}

}  // namespace
}  // namespace vispco::optimize
