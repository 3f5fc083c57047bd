// Pareto frontier (optimize/pareto.h) on hand-made points: dominance, ties in cost or accuracy, exact
// duplicates, order, and a brute-force comparison on random points.
#include <gtest/gtest.h>

#include <random>

#include "core/errors.h"
#include "optimize/pareto.h"

namespace vispco::optimize {
namespace {

TEST(Pareto, HandMadePoints) {
  //            0            1            2            3            4           5
  const std::vector<ParetoPoint> pts{{1.0, .80}, {0.5, .70}, {0.5, .75}, {0.3, .75}, {0.2, .40}, {0.6, .60}};
  // 2 (0.5, .75) is dominated by 3 (0.3, .75): equal accuracy, higher cost. 1 by 2 and 3. 5 by 3.
  EXPECT_EQ(pareto_frontier(pts), (std::vector<size_t>{4, 3, 0}));
}

TEST(Pareto, EqualCostKeepsTheMoreAccurateOnly) {
  EXPECT_EQ(pareto_frontier({{0.5, .6}, {0.5, .7}, {0.5, .65}}), (std::vector<size_t>{1}));
}

TEST(Pareto, ExactDuplicatesAreAllOnTheFrontierInInputOrder) {
  const std::vector<ParetoPoint> pts{{0.4, .7}, {1.0, .9}, {0.4, .7}, {0.1, .2}, {0.4, .7}};
  EXPECT_EQ(pareto_frontier(pts), (std::vector<size_t>{3, 0, 2, 4, 1}));
}

TEST(Pareto, EdgeCases) {
  EXPECT_TRUE(pareto_frontier({}).empty());
  EXPECT_EQ(pareto_frontier({{0.5, 0.5}}), (std::vector<size_t>{0}));
  // A free, perfect plan dominates everything else.
  EXPECT_EQ(pareto_frontier({{0.5, .5}, {0.0, 1.0}, {1.0, .9}}), (std::vector<size_t>{1}));
  EXPECT_THROW(pareto_frontier({{std::nan(""), .5}}), InvalidArgument);
  EXPECT_THROW(pareto_frontier({{0.5, INFINITY}}), InvalidArgument);
}

TEST(Pareto, MatchesBruteForceOnRandomPointsWithManyTies) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<ParetoPoint> pts(1 + rng() % 30);
    for (auto& p : pts) p = {(rng() % 6) / 5.0, (rng() % 6) / 5.0};  // coarse values: ties everywhere
    std::vector<size_t> want;
    for (size_t i = 0; i < pts.size(); ++i) {
      bool dominated = false;
      for (size_t j = 0; j < pts.size() && !dominated; ++j)
        dominated = pts[j].cost <= pts[i].cost && pts[j].accuracy >= pts[i].accuracy &&
                    (pts[j].cost < pts[i].cost || pts[j].accuracy > pts[i].accuracy);
      if (!dominated) want.push_back(i);
    }
    std::vector<size_t> got = pareto_frontier(pts);
    for (size_t i = 1; i < got.size(); ++i) {
      EXPECT_LE(pts[got[i - 1]].cost, pts[got[i]].cost);
      EXPECT_LE(pts[got[i - 1]].accuracy, pts[got[i]].accuracy);
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace vispco::optimize
