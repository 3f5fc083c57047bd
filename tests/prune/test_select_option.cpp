// Scorer split from selector (prune/selector.h, stage option select=NAME) against independent computations:
// maximal marginal relevance against a plain re-implementation, the selectors that restate a method's own
// rule keep exactly its tokens, FastV + MMR on the tiny model equals MMR computed by hand from the attention
// row and the hidden states, and every misuse is a one-line InvalidArgument.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"
#include "prune/selector.h"

namespace vispco {
namespace {

// MMR written from Carbonell & Goldstein's definition, on plain vectors.
std::vector<int64_t> mmr_by_hand(const std::vector<double>& rel, const std::vector<std::vector<double>>& sim,
                                 int64_t k, double lambda) {
  std::vector<int64_t> chosen;
  const int64_t n = rel.size();
  while ((int64_t)chosen.size() < k) {
    int64_t best = -1;
    double best_v = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
      double red = -1e300;
      for (auto j : chosen) red = std::max(red, sim[i][j]);
      const double v = chosen.empty() ? rel[i] : lambda * rel[i] - (1 - lambda) * red;
      if (best < 0 || v > best_v) best = i, best_v = v;
    }
    chosen.push_back(best);
  }
  return chosen;
}

TEST(MmrSelect, SkipsADuplicateOfTheFirstPickUnlessLambdaIsOne) {
  // Tokens 0 and 1 are the same direction, 2 is orthogonal: relevance 1, 0.9, 0.5.
  auto rel = at::tensor({1.0f, 0.9f, 0.5f});
  auto sim = at::tensor({1.f, 1.f, 0.f, 1.f, 1.f, 0.f, 0.f, 0.f, 1.f}).view({3, 3});
  // λ = 0.5: token 1 gains 0.45 − 0.5 = −0.05, token 2 gains 0.25 − 0 = 0.25.
  EXPECT_EQ(mmr_select(rel, sim, 2, 0.5), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(mmr_select(rel, sim, 2, 1.0), (std::vector<int64_t>{0, 1}));  // λ = 1: plain top-K
  EXPECT_EQ(mmr_select(rel, sim, 3, 0.5), (std::vector<int64_t>{0, 2, 1}));
}

TEST(MmrSelect, EqualsAPlainReimplementationOnRandomInputs) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t n = 12, k = 5;
    auto x = at::randn({n, 4}, gen, at::kDouble);
    auto xn = x / x.norm(2, 1, true);
    auto sim = at::matmul(xn, xn.t());
    auto rel = at::rand({n}, gen, at::kDouble);
    std::vector<double> r(n);
    std::vector<std::vector<double>> s(n, std::vector<double>(n));
    for (int64_t i = 0; i < n; ++i) {
      r[i] = rel[i].item<double>();
      for (int64_t j = 0; j < n; ++j) s[i][j] = sim[i][j].item<double>();
    }
    for (double lambda : {0.0, 0.3, 0.7})
      EXPECT_EQ(mmr_select(rel, sim, k, lambda), mmr_by_hand(r, s, k, lambda)) << trial << " λ " << lambda;
  }
}

TEST(RelevanceFromScores, MinMaxNormalisesAsCdPrunersRelease) {
  auto r = relevance_from_scores(at::tensor({2.0f, 4.0f, 3.0f}));
  EXPECT_NEAR(r[0].item<float>(), 1e-6 / 2, 1e-9);
  EXPECT_NEAR(r[1].item<float>(), (2 + 1e-6) / 2, 1e-6);
  EXPECT_NEAR(r[2].item<float>(), (1 + 1e-6) / 2, 1e-6);
}

struct Tiny {
  VisionLanguageModel m = testing::load_tiny();
  VlmRequest req{testing::test_pixels(56, 31), m.prompt_ids("How many red spheres are there?")};
  std::set<int64_t> kept(const std::string& plan) {
    GenerationConfig gc;
    gc.max_new_tokens = 1;
    PlanHook hook(parse_plan(plan, 16), m.shape());
    generate(m, {req}, gc, &hook);
    EXPECT_EQ(hook.traces().size(), 1u) << plan;
    return testing::kept_patches(hook.traces().back().kept[0]);
  }
};

TEST(SelectOption, SelectorsThatRestateAMethodsOwnRuleKeepItsTokens) {
  Tiny t;
  // CDPruner = its relevance + the conditional DPP; FastV, random and the gate-free top-K methods = top-K.
  EXPECT_EQ(t.kept("cdpruner:layer=0,keep=5,select=dpp"), t.kept("cdpruner:layer=0,keep=5"));
  EXPECT_EQ(t.kept("cdpruner:layer=0,keep=5,select=dpp,theta=0.5"),
            t.kept("cdpruner:layer=0,keep=5,theta=0.5"));
  EXPECT_EQ(t.kept("fastv:layer=1,keep=5,select=topk"), t.kept("fastv:layer=1,keep=5"));
  EXPECT_EQ(t.kept("fastv:layer=1,keep=5,select=mmr,lambda=1"), t.kept("fastv:layer=1,keep=5"));
  EXPECT_EQ(t.kept("random:layer=0,keep=5,select=topk"), t.kept("random:layer=0,keep=5"));
  EXPECT_EQ(t.kept("sparsevlm:layer=1,keep=5,select=topk"), t.kept("sparsevlm:layer=1,keep=5,recycle=0"));
  // A real change of rule changes the kept set here (else the equalities above would prove nothing).
  EXPECT_NE(t.kept("fastv:layer=1,keep=5,select=dpp"), t.kept("fastv:layer=1,keep=5"));
}

TEST(SelectOption, FastVScoresWithMmrEqualMmrComputedByHand) {
  Tiny t;
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  testing::RecordHook at0(0), at1(1);
  generate(t.m, {t.req}, gc, &at0);
  generate(t.m, {t.req}, gc, &at1);
  // FastV's score: the last prompt token's head-mean attention at layer 0; similarity: cosine of the tokens
  // entering layer 1 (where the stage acts); relevance: the scores min–max normalised (+1e−6).
  const auto vis = testing::visual_tokens(at0.seen);
  const int64_t T = at0.seen.hidden.size(1), N = vis.size();
  const auto row = testing::attention_row_by_hand(t.m, at0.seen, 0, T - 1);
  std::vector<double> score(N);
  for (int64_t i = 0; i < N; ++i) score[i] = row[vis[i]];
  const double lo = *std::min_element(score.begin(), score.end()),
               hi = *std::max_element(score.begin(), score.end());
  std::vector<double> rel(N);
  std::vector<std::vector<double>> sim(N, std::vector<double>(N));
  const auto vis1 = testing::visual_tokens(at1.seen);
  for (int64_t i = 0; i < N; ++i) {
    rel[i] = (score[i] - lo + 1e-6) / (hi - lo);
    for (int64_t j = 0; j < N; ++j)
      sim[i][j] = testing::cosine(at1.seen.hidden[0][vis1[i]], at1.seen.hidden[0][vis1[j]]);
  }
  for (double lambda : {0.3, 0.6}) {
    std::set<int64_t> expect;
    for (auto i : mmr_by_hand(rel, sim, 5, lambda))
      expect.insert(at1.seen.grid_index[0][vis1[i]].item<int64_t>());
    EXPECT_EQ(t.kept("fastv:layer=1,keep=5,select=mmr,lambda=" + std::to_string(lambda)), expect) << lambda;
  }
}

std::string error_of(const std::string& plan);  // the one-line error a plan's check gives (below)

// select=merge on six alive tokens, by hand: scores 0.9 0.1 0.8 0.2 0.3 0.05, K = 4 with 2 contextual tokens
// → tokens 0 and 2 stay; the rest (1, 3, 4, 5) get targets 1 and 4 (stride 4 / 2), token 3 joins 1 and
// token 5 joins 4 by cosine; a contextual token is the mean of its group, placed at its target's patch.
TEST(SelectOption, MergeKeepsTheTopScoresAndAveragesTheRestIntoContextualTokens) {
  TokenState st;
  st.hidden = at::zeros({1, 8, 2});
  const float h[6][2] = {{5, 5}, {1, 0}, {3, 3}, {0.9f, 0.1f}, {0, 1}, {0.2f, 1}};
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t d = 0; d < 2; ++d) st.hidden[0][1 + i][d] = h[i][d];
  st.grid_index = at::full({1, 8}, -1L, at::kLong);
  for (int64_t i = 0; i < 6; ++i) st.grid_index[0][1 + i] = 10 + i;
  PruneStage stage{1, 4, "fastv", {{"select", "merge"}, {"contextual", "2"}}};
  ScoreInput in;
  in.state = &st;
  in.visual_pos = at::arange(1, 7, at::kLong).unsqueeze(0);
  in.stage = &stage;
  auto sel =
      make_selector("merge")->select(at::tensor({0.9f, 0.1f, 0.8f, 0.2f, 0.3f, 0.05f}).unsqueeze(0), in);
  auto keep = std::get<0>(sel.keep[0].sort());
  ASSERT_EQ(keep.numel(), 2);
  EXPECT_EQ(keep[0].item<int64_t>(), 0);
  EXPECT_EQ(keep[1].item<int64_t>(), 2);
  ASSERT_EQ(sel.merged.sizes(), (at::IntArrayRef{1, 2, 2}));
  EXPECT_NEAR(sel.merged[0][0][0].item<float>(), 0.95f, 1e-6);
  EXPECT_NEAR(sel.merged[0][0][1].item<float>(), 0.05f, 1e-6);
  EXPECT_NEAR(sel.merged[0][1][0].item<float>(), 0.1f, 1e-6);
  EXPECT_NEAR(sel.merged[0][1][1].item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(sel.merged_grid_index[0][0].item<int64_t>(), 11);
  EXPECT_EQ(sel.merged_grid_index[0][1].item<int64_t>(), 14);
}

TEST(SelectOption, MergeRunsInsideTheLlmAndWithoutContextualTokensIsTopK) {
  Tiny t;
  EXPECT_EQ(t.kept("fastv:layer=1,keep=5,select=merge,contextual=0"), t.kept("fastv:layer=1,keep=5"));
  // Two contextual tokens: the three dominant ones are FastV's top 3, and two patches more are marked kept
  // (the merged tokens' places).
  const auto top3 = t.kept("fastv:layer=1,keep=3");
  const auto merged = t.kept("fastv:layer=1,keep=5,select=merge,contextual=2");
  for (auto p : top3) EXPECT_EQ(merged.count(p), 1u) << p;
  EXPECT_EQ(merged.size(), 5u);
  EXPECT_TRUE(error_of("fastv:layer=1,keep=5,select=merge,contextual=5").find("contextual") !=
              std::string::npos);
}

std::string error_of(const std::string& plan) {
  auto m = testing::load_tiny();
  try {
    PlanHook hook(parse_plan(plan, 16), m.shape());
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SelectOption, MisuseIsAOneLineErrorNamingTheFix) {
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos && msg.find('\n') == std::string::npos;
  };
  EXPECT_TRUE(has(error_of("divprune:layer=0,keep=5,select=topk"), "no per-token score"));
  EXPECT_TRUE(has(error_of("divprune:layer=0,keep=5,select=topk"), "fastv"));  // lists the scorers with one
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,select=best"),
                  "unknown selector 'best' (valid: topk, mmr, dpp, merge, threshold)"));
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,select=mmr,lambda=2"), "lambda must be in [0, 1]"));
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,select=dpp,theta=1"), "theta must be in [0, 1)"));
  EXPECT_TRUE(
      has(error_of("fastv:layer=1,keep=5,lambda=0.5"), "unknown option 'lambda'"));  // needs select=mmr
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,select=topk,lambda=0.5"), "unknown option 'lambda'"));
  // select= replaces VisionZip's own dominant + contextual rule, so its contextual option no longer applies.
  EXPECT_TRUE(
      has(error_of("visionzip:layer=0,keep=5,contextual=2,select=topk"), "unknown option 'contextual'"));
  EXPECT_EQ(error_of("visionzip:layer=0,keep=5,select=mmr,lambda=0.2"), "(no error)");
  // The valid options listed: select only where the scorer has scores, "none" for an empty list.
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,foo=1"), "unknown option 'foo' (valid: select)"));
  EXPECT_TRUE(has(error_of("uniform:layer=0,keep=5,foo=1"), "unknown option 'foo' (valid: none)"));
  EXPECT_TRUE(has(error_of("fastv:layer=1,keep=5,select=mmr,foo=1"), "(valid: select, lambda)"));
}

}  // namespace
}  // namespace vispco
