// Ladder labels, assignment figures and K batching against figures worked out by hand.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "optimize/dynamic_k/auto_keep_eval.h"
#include "optimize/dynamic_k/ladder_table.h"

namespace vispco::optimize {
namespace {

// Four rungs K = 2, 4, 8, 16 (16 = N_v); per-sample FLOPs 10·K + 100.
LadderTable table(const std::vector<std::vector<double>>& score,
                  const std::vector<std::vector<uint8_t>>& agree) {
  LadderTable t;
  t.ladder = {2, 4, 8, 16};
  for (size_t i = 0; i < score.size(); ++i) {
    t.ids.push_back("s" + std::to_string(i));
    t.families.push_back(i % 2 == 0 ? "even" : "odd");
    t.score.push_back(score[i]);
    t.agree.push_back(agree[i]);
    std::vector<double> f;
    for (auto k : t.ladder) f.push_back(10.0 * k + 100.0);
    t.llm_flops.push_back(f);
  }
  return t;
}

TEST(LadderLabels, SmallestRungFromWhichTheAnswerStaysRight) {
  const auto t = table({{0, 1, 0, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 1, 1}},
                       {{0, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}});
  // s0: right at 4 but wrong at 8, so only the last rung counts; s2: wrong even unpruned; s3: from rung 2.
  EXPECT_EQ(ladder_labels(t, KTarget::kCorrect), (std::vector<int>{3, 0, -1, 2}));
  EXPECT_EQ(ladder_labels(t, KTarget::kAgree), (std::vector<int>{1, 0, 2, 3}));
}

TEST(LadderLabels, AssignmentFiguresByHand) {
  const auto t = table({{0, 1, 1, 1}, {1, 1, 1, 0}}, {{0, 1, 1, 1}, {0, 0, 0, 1}});
  const auto f = assignment_figures(t, {1, 0});  // s0 at K=4 (right), s1 at K=2 (right)
  EXPECT_DOUBLE_EQ(f.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(f.mean_keep, 3.0);
  EXPECT_DOUBLE_EQ(f.flops_ratio, (140.0 + 120.0) / (260.0 + 260.0));
  EXPECT_DOUBLE_EQ(f.per_family.at("odd").unpruned_accuracy, 0.0);
  EXPECT_DOUBLE_EQ(f.per_family.at("even").flops_ratio, 140.0 / 260.0);
  const auto full = assignment_figures(t, constant_rungs(t, 3));
  EXPECT_DOUBLE_EQ(full.accuracy, 0.5);
  EXPECT_DOUBLE_EQ(full.flops_ratio, 1.0);
  EXPECT_THROW(assignment_figures(t, {4, 0}), InvalidArgument);
  EXPECT_THROW(assignment_figures(t, {0}), InvalidArgument);
}

TEST(LadderLabels, RejectsAMalformedTable) {
  auto t = table({{0, 1, 1, 1}}, {{0, 1, 1, 1}});
  t.ladder = {4, 2, 8, 16};
  EXPECT_THROW(ladder_labels(t, KTarget::kCorrect), InvalidArgument);
  t = table({{0, 1, 1}}, {{0, 1, 1, 1}});
  EXPECT_THROW(ladder_labels(t, KTarget::kCorrect), InvalidArgument);
  EXPECT_THROW(k_target_from_name("right"), InvalidArgument);
}

TEST(KBatching, GroupingByKAgainstArrivalOrderByHand) {
  const auto b = k_batching({16, 64, 16, 64, 64}, 2);
  EXPECT_EQ(b.n_batches_grouped, 3u);     // K=16: 2 rows → 1 batch; K=64: 3 rows → 2 batches
  EXPECT_EQ(b.n_batches_arrival, 3u);     // [16, 64] [16, 64] [64]
  EXPECT_EQ(b.padded_slots_arrival, 96);  // two rows padded from 16 to 64
  EXPECT_EQ(b.kept_slots, 224);
  const auto one = k_batching({8, 8, 8}, 4);
  EXPECT_EQ(one.n_batches_grouped, 1u);
  EXPECT_EQ(one.padded_slots_arrival, 0);
  EXPECT_THROW(k_batching({8}, 0), InvalidArgument);
}

}  // namespace
}  // namespace vispco::optimize
