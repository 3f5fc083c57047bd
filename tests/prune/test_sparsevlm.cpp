// SparseVLM (prune/scorers/sparsevlm.cpp) against independent computations: rater selection on a constructed
// relevance pattern worked out by hand; the rater-averaged score on a constructed attention pattern; on the
// tiny model, the raters from the input embeddings and the kept set from the raters' attention at layer ℓ−1
// recomputed with the reference ops; recycling keeps K in total with merged tokens at cluster centres.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

TEST(SparseVlm, RatersAreTheTextTokensRelevantToTheImage) {
  // Visual tokens along e0 and e1; text tokens 0 and 2 point the same ways, 1 and 3 along e2 (unrelated).
  // Each visual token's softmax over the 4 text tokens puts ≈ 0.98 on its match, ≈ 0.007 elsewhere; averaged
  // over the visual tokens: [0.49, 0.007, 0.49, 0.007], mean 0.25 → raters {0, 2}.
  auto V = at::zeros({4, 3}, at::kFloat);
  V[0][0] = V[1][0] = 5;
  V[2][1] = V[3][1] = 5;
  auto Q = at::zeros({4, 3}, at::kFloat);
  Q[0][0] = 1;
  Q[1][2] = 1;
  Q[2][1] = 1;
  Q[3][2] = 1;
  EXPECT_EQ(sparsevlm_raters(V, Q), (std::vector<int64_t>{0, 2}));
  // Only one relevant text token when the image is about e0 alone.
  EXPECT_EQ(sparsevlm_raters(V.narrow(0, 0, 2), Q), (std::vector<int64_t>{0}));
  // All equal: no token above the mean → every token rates.
  EXPECT_EQ(sparsevlm_raters(V, at::zeros({3, 3})), (std::vector<int64_t>{0, 1, 2}));
}

TEST(SparseVlm, ScoresAreTheRaterWeightedHeadMeanOfAConstructedAttentionPattern) {
  // T = 7: [text, v0, v1, v2, v3, rater a, rater b]; 2 heads; rater b counts double.
  const int64_t T = 7;
  TokenState s;
  s.hidden = at::randn({1, T, 4});
  s.positions = at::arange(T, at::kLong).unsqueeze(0);
  s.valid = at::ones({1, T}, at::kBool);
  s.visual = at::zeros({1, T}, at::kBool);
  s.visual.narrow(1, 1, 4).fill_(true);
  s.grid_index = at::full({1, T}, -1, at::kLong);
  s.grid_index.narrow(1, 1, 4).copy_(at::arange(4, at::kLong));
  auto attn = at::zeros({1, 2, 2, T}, at::kFloat);
  // Head 0: rater a likes v0, rater b likes v2. Head 1: rater a likes v1, rater b likes v2 and v3.
  attn[0][0][0][1] = 0.8;
  attn[0][0][1][3] = 0.6;
  attn[0][1][0][2] = 0.4;
  attn[0][1][1][3] = 0.2;
  attn[0][1][1][4] = 0.3;
  // Weighted head means: v0 = (0.8/2)·(1/3) = .133, v1 = (0.4/2)·(1/3) = .067, v2 = ((0.6+0.2)/2)·(2/3) =
  // .267, v3 = (0.3/2)·(2/3) = .1 → top 2 = {v2, v0}.
  PruneStage st{2, 2, "sparsevlm", {{"recycle", "0"}}};
  ScoreInput in;
  in.state = &s;
  in.visual_pos = at::arange(1, 5, at::kLong).unsqueeze(0);
  in.attn_rows = attn;
  in.attn_weights = at::tensor({1.0f / 3, 2.0f / 3}).unsqueeze(0);
  in.stage = &st;
  in.layer = 2;
  auto sel = make_scorer("sparsevlm")->select(in);
  auto expect = at::tensor({0.8f / 6, 0.4f / 6, 0.8f / 3, 0.1f}).unsqueeze(0);
  EXPECT_LT(testing::max_diff(sel.scores, expect), 1e-6);
  std::set<int64_t> kept;
  for (int64_t i = 0; i < 2; ++i) kept.insert(sel.keep[0][i].item<int64_t>());
  EXPECT_EQ(kept, (std::set<int64_t>{0, 2}));
  EXPECT_FALSE(sel.merged.defined());
  // With one recycled token: the top 1 kept, the best of the rest (30% of 3, rounded up: 1 token, at least
  // M = 1) becomes the merged token at its own patch.
  st.options["recycle"] = "1";
  sel = make_scorer("sparsevlm")->select(in);
  ASSERT_EQ(sel.keep.size(1), 1);
  EXPECT_EQ(sel.keep[0][0].item<int64_t>(), 2);
  ASSERT_EQ(sel.merged.size(1), 1);
  EXPECT_EQ(sel.merged_grid_index[0][0].item<int64_t>(), 0);
  EXPECT_LT(testing::max_diff(sel.merged[0][0], s.hidden[0][1]), 1e-6);
}

TEST(SparseVlm, DensityPeakClustersMergeNearDuplicates) {
  // Two tight groups of six far apart (each token's 5 nearest neighbours are its own group): 2 clusters,
  // each the mean of its group, one centre inside each group.
  std::vector<float> v;
  const float off[6][2] = {{0, 0}, {0.1f, 0}, {0, 0.1f}, {0.1f, 0.1f}, {0.05f, 0.02f}, {0.02f, 0.07f}};
  for (int g = 0; g < 2; ++g)
    for (auto& o : off) v.insert(v.end(), {o[0] + 10 * g, o[1] + 10 * g});
  auto x = at::tensor(v).view({12, 2});
  auto [merged, centres] = dpc_knn_merge(x, 2);
  ASSERT_EQ(centres.size(), 2u);
  EXPECT_NE(centres[0] / 6, centres[1] / 6);
  for (int c = 0; c < 2; ++c)
    EXPECT_LT(testing::max_diff(merged[c], x.narrow(0, 6 * (centres[c] / 6), 6).mean(0)), 1e-5);
}

TEST(SparseVlm, TinyModelKeptSetEqualsRaterAttentionRecomputedByHand) {
  auto m = testing::load_tiny();
  const int64_t layer = 2, K = 5;
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  VlmRequest req{testing::test_pixels(56, 41),
                 m.prompt_ids("What color is the large cube behind the sphere?")};
  testing::RecordHook in0(0), in1(layer - 1);
  generate(m, {req}, gc, &in0);
  generate(m, {req}, gc, &in1);
  PlanHook sv(parse_plan("sparsevlm:layer=2,keep=5,recycle=0", 16), m.shape());
  generate(m, {req}, gc, &sv);
  ASSERT_EQ(sv.traces().size(), 1u);

  // Raters by hand from the input embeddings: softmax over text of v·t, mean over visual, above the mean.
  const auto vis0 = testing::visual_tokens(in0.seen), txt0 = testing::instruction_tokens(in0.seen);
  std::vector<double> rel(txt0.size(), 0.0);
  for (auto v : vis0) {
    std::vector<double> logit;
    double mx = -1e300, z = 0;
    for (auto t : txt0) {
      logit.push_back(at::dot(in0.seen.hidden[0][v], in0.seen.hidden[0][t]).item<double>());
      mx = std::max(mx, logit.back());
    }
    for (auto l : logit) z += std::exp(l - mx);
    for (size_t j = 0; j < txt0.size(); ++j) rel[j] += std::exp(logit[j] - mx) / z / vis0.size();
  }
  double mean = 0;
  for (auto r : rel) mean += r / rel.size();
  std::vector<int64_t> raters;  // indices into T (no pruning before layer 2, so T indices are unchanged)
  for (size_t j = 0; j < txt0.size(); ++j)
    if (rel[j] > mean) raters.push_back(txt0[j]);
  ASSERT_FALSE(raters.empty());
  std::printf("SparseVLM raters: %zu of %zu instruction tokens\n", raters.size(), txt0.size());

  // Score: mean over raters of the head-mean attention at layer 1, recomputed from its input.
  const auto vis = testing::visual_tokens(in1.seen);
  std::vector<std::pair<double, int64_t>> ranked;
  std::vector<std::vector<double>> rows;
  for (auto r : raters) rows.push_back(testing::attention_row_by_hand(m, in1.seen, layer - 1, r));
  for (auto v : vis) {
    double s = 0;
    for (const auto& row : rows) s += row[v] / rows.size();
    ranked.push_back({s, in1.seen.grid_index[0][v].item<int64_t>()});
  }
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::set<int64_t> expect;
  for (int64_t i = 0; i < K; ++i) expect.insert(ranked[i].second);
  EXPECT_EQ(testing::kept_patches(sv.traces()[0].kept[0]), expect);
  std::printf("SparseVLM margin between ranks K and K+1: %.3g\n", ranked[K - 1].first - ranked[K].first);

  // Default recycling: K = 5 of 16 → M = ⌊(⌊0.3·11⌋ + 1)/10⌋ + 1 = 1 merged token; 5 visual tokens in all.
  PlanHook rec(parse_plan("sparsevlm:layer=2,keep=5", 16), m.shape());
  auto out = generate(m, {req}, gc, &rec);
  EXPECT_EQ(out.stats.n_visual_kept, 5);
  // Progressive: two stages.
  PlanHook prog(parse_plan("sparsevlm:layer=1,keep=10+sparsevlm:layer=3,keep=4", 16), m.shape());
  out = generate(m, {req}, gc, &prog);
  EXPECT_EQ(out.stats.n_visual_kept, 4);
  EXPECT_EQ(out.stats.tokens_per_layer[1] - out.stats.tokens_per_layer[3], 6);
  for (const char* bad : {"sparsevlm:layer=0,keep=4", "sparsevlm:layer=2,keep=4,recycle=4",
                          "sparsevlm:layer=2,keep=4,recycle=-1", "sparsevlm:layer=2,keep=4,raters=3"})
    EXPECT_THROW(PlanHook(parse_plan(bad, 16), m.shape()), InvalidArgument) << bad;
}

TEST(SparseVlm, BatchedRowsWithDifferentRaterCountsEqualEachRowAlone) {
  auto m = testing::load_tiny();
  GenerationConfig gc;
  gc.max_new_tokens = 3;
  gc.stop_at_eos = false;
  std::vector<VlmRequest> reqs = {
      {testing::test_pixels(56, 51), m.prompt_ids("What shape?")},
      {testing::test_pixels(56, 52), m.prompt_ids("Is there a small green cube left of "
                                                  "the big red sphere in the picture?")}};
  PlanHook both(parse_plan("sparsevlm:layer=2,keep=6", 16), m.shape());
  auto batch = generate(m, reqs, gc, &both, true);
  for (int b = 0; b < 2; ++b) {
    PlanHook one(parse_plan("sparsevlm:layer=2,keep=6", 16), m.shape());
    auto alone = generate(m, {reqs[b]}, gc, &one, true);
    EXPECT_EQ(batch.tokens[b], alone.tokens[0]) << b;
    EXPECT_EQ(testing::kept_patches(both.traces()[0].kept[b]), testing::kept_patches(one.traces()[0].kept[0]))
        << b;
    EXPECT_LT(testing::max_diff(batch.step_logits[0][b], alone.step_logits[0][0]), 1e-4) << b;
  }
}

}  // namespace
}  // namespace vispco
