// VisPCO's training-mode pruning (src/optimize/learned/soft_prune.h) scores through the scorer registry: the
// hook asks for the last *prompt* token's attention (not the last column, which is an answer token in a
// teacher-forced forward), keeps the tokens the registered scorer ranks highest, and VisPCO accepts exactly
// the scorers that can score such a forward.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "optimize/learned/soft_prune.h"

namespace vispco::optimize::learned {
namespace {

// One row: 2 text tokens, 6 visual tokens (positions 2–7), the last prompt token at 8, answer tokens 9–10.
TokenState state_of_11_tokens() {
  TokenState s;
  s.hidden = at::zeros({1, 11, 4});
  s.positions = at::arange(11, at::kLong).unsqueeze(0);
  s.valid = at::ones({1, 11}, at::kBool);
  s.visual = at::zeros({1, 11}, at::kBool);
  s.visual.narrow(1, 2, 6).fill_(true);
  s.grid_index = at::full({1, 11}, -1L, at::kLong);
  return s;
}

TEST(SoftPrune, FastVFromTheRegistryReadsTheLastPromptTokenAndKeepsItsTopTokens) {
  auto state = state_of_11_tokens();
  auto visual_pos = at::arange(2, 8, at::kLong).unsqueeze(0);
  auto query_pos = at::tensor({8L});
  auto fractions = at::full({1, 3}, 0.5f);  // layer 1 keeps 3 of the 6 visual tokens
  auto scorer = make_scorer("fastv");
  // A narrow rank window: with 6 tokens the release's width 5 averages in the lowest score (log 1e−8).
  SoftThresholdSelector selector(SoftThresholdOptions{.width = 0.5});
  SoftPruneHook hook(fractions, visual_pos, query_pos, 1, *scorer, "fastv", selector);
  auto rows = hook.attention_rows(0, state);
  ASSERT_TRUE(rows.defined());
  EXPECT_EQ(rows.numel(), 1);
  EXPECT_EQ(rows.item<int64_t>(), 8) << "the scoring query must be the last prompt token, not column 10";
  EXPECT_FALSE(hook.gate(0, state, {}).defined()) << "layer 0 is not pruned";
  // Two heads; head means over the visual keys 2..7: 0.10, 0.30, 0.05, 0.25, 0.20, 0.15 → keep keys 3, 5, 6.
  auto attn = at::zeros({1, 2, 1, 11});
  attn[0][0][0].narrow(0, 2, 6).copy_(at::tensor({0.10f, 0.50f, 0.00f, 0.30f, 0.20f, 0.10f}));
  attn[0][1][0].narrow(0, 2, 6).copy_(at::tensor({0.10f, 0.10f, 0.10f, 0.20f, 0.20f, 0.20f}));
  auto g = hook.gate(1, state, attn);
  ASSERT_EQ(g.sizes(), (at::IntArrayRef{1, 11}));
  const float expect[11] = {1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1};  // text and answer tokens are never gated
  for (int64_t t = 0; t < 11; ++t) EXPECT_EQ(g[0][t].item<float>(), expect[t]) << "token " << t;
  auto counts = hook.hard_counts();
  EXPECT_EQ(counts[0][0].item<int64_t>(), 6);
  EXPECT_EQ(counts[0][1].item<int64_t>(), 3);
}

TEST(SoftPrune, TheRandomScorerGatesAboutKTokensAndItsSeedChoosesWhich) {
  auto state = state_of_11_tokens();
  auto visual_pos = at::arange(2, 8, at::kLong).unsqueeze(0);
  auto scorer = make_scorer("random");
  SoftThresholdSelector selector(SoftThresholdOptions{.width = 0.5});
  auto kept_with = [&](uint64_t seed) {
    SoftPruneHook hook(at::full({1, 3}, 0.5f), visual_pos, at::tensor({8L}), 1, *scorer, "random", selector,
                       seed);
    EXPECT_FALSE(hook.attention_rows(0, state).defined()) << "random reads no attention";
    hook.gate(0, state, {});
    return hook.gate(1, state, {}).narrow(1, 2, 6).clone();
  };
  auto a = kept_with(1);
  EXPECT_NEAR(a.sum().item<double>(), 3.0, 1.0);
  EXPECT_TRUE(at::equal(a, kept_with(1)));
  bool differs = false;
  for (uint64_t seed = 2; seed < 12 && !differs; ++seed) differs = !at::equal(a, kept_with(seed));
  EXPECT_TRUE(differs) << "ten seeds chose the same tokens";
}

TEST(SoftPrune, VisPcoAcceptsTheScorersThatCanScoreATeacherForcedForward) {
  EXPECT_NO_THROW(check_soft_prune_scorer("fastv"));
  EXPECT_NO_THROW(check_soft_prune_scorer("random"));
  for (const std::string bad : {"sparsevlm", "cdpruner", "visionzip", "divprune", "grad", "dart"}) {
    try {
      check_soft_prune_scorer(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("(valid: fastv, random)"), std::string::npos) << msg;
    }
  }
  try {
    check_soft_prune_scorer("fast");
    ADD_FAILURE() << "an unknown scorer was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown scorer 'fast' (valid: fastv, random)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vispco::optimize::learned
