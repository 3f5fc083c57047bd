// min-K binary search (optimize/min_k.h) on injected accuracy curves: the answer is checked against the
// smallest K within ε found by exhaustive scan of the same curve, probes are counted, and monotonicity
// violations are compared with the adjacent decreasing pairs computed here independently.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "core/errors.h"
#include "optimize/min_k.h"

namespace vispco::optimize {
namespace {

// The exhaustive answer: the smallest candidate whose accuracy is ≥ threshold, or −1.
int64_t exhaustive_min_k(const std::map<int64_t, double>& curve, double threshold) {
  for (const auto& [k, a] : curve)
    if (a >= threshold) return k;
  return -1;
}

struct SearchRun {
  MinKResult result;
  std::map<int64_t, int> calls;  // K → times the callback was asked
};

SearchRun search(const std::map<int64_t, double>& curve, double ref, const MinKOptions& o,
                 const std::map<int64_t, double>& known = {}) {
  SearchRun r;
  r.result = min_k_search(
      [&](int64_t k) {
        ++r.calls[k];
        return curve.at(k);
      },
      ref, o, known);
  return r;
}

MinKOptions range(int64_t lo, int64_t hi, double eps = 0.1) {
  MinKOptions o;
  o.k_min = lo;
  o.k_max = hi;
  o.epsilon = eps;
  return o;
}

TEST(MinK, MonotoneCurvesGiveTheExhaustiveSmallestK) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + rng() % 200;
    // A random non-decreasing curve of accuracies that are ratios of a 100-sample split.
    std::map<int64_t, double> curve;
    int correct = static_cast<int>(rng() % 30);
    for (int64_t k = 1; k <= n; ++k) {
      correct = std::min(100, correct + static_cast<int>(rng() % 3 == 0 ? rng() % 4 : 0));
      curve[k] = correct / 100.0;
    }
    const double ref = std::min(1.0, curve[n] + (rng() % 3) / 100.0);
    MinKOptions o = range(1, n, (rng() % 20) / 100.0);
    const double threshold = ref * (1 - o.epsilon);
    const SearchRun r = search(curve, ref, o);
    const int64_t want = exhaustive_min_k(curve, threshold - 1e-12);
    ASSERT_EQ(r.result.chosen.value_or(-1), want) << "trial " << trial << " n " << n;
    EXPECT_TRUE(r.result.violations.empty()) << "trial " << trial;
    for (const auto& [k, c] : r.calls) EXPECT_EQ(c, 1) << "K=" << k << " probed twice";
    // log₂ bound: the first probe at k_max, then ⌈log₂ n⌉ bisection steps at most.
    EXPECT_LE(r.result.probes.size(), 2 + static_cast<size_t>(std::ceil(std::log2(static_cast<double>(n)))));
  }
}

TEST(MinK, HandMadeMonotoneCurve) {
  // K:   1    2    3    4    5    6    7    8
  // acc .20  .40  .60  .80  .85  .90  .95  1.0; ref 1.0, ε = 0.1 → threshold 0.9 → smallest K = 6.
  const std::map<int64_t, double> curve{{1, .2},  {2, .4}, {3, .6},  {4, .8},
                                        {5, .85}, {6, .9}, {7, .95}, {8, 1.0}};
  const SearchRun r = search(curve, 1.0, range(1, 8, 0.1));
  ASSERT_TRUE(r.result.chosen);
  EXPECT_EQ(*r.result.chosen, 6);  // 0.9 == 1.0·(1 − 0.1) exactly at the threshold counts as within
  // Probe order by the stated rule: K=8 (max), then C[⌊(0+7)/2⌋]=4 (out), C[⌊(4+7)/2⌋]=6 (in), C[⌊(4+5)/2⌋]=5
  // (out).
  std::vector<int64_t> order;
  for (const auto& p : r.result.probes) order.push_back(p.keep);
  EXPECT_EQ(order, (std::vector<int64_t>{8, 4, 6, 5}));
  EXPECT_FALSE(r.result.rule.empty());
}

TEST(MinK, AccuracyWigglesAboveTheThresholdAreReportedAndDoNotChangeTheAnswer) {
  // Within ε is monotone (threshold 0.5), accuracy is not: K=6 is better than K=7 and K=8.
  // K:   1    2    3    4    5    6    7    8
  const std::map<int64_t, double> curve{{1, .1}, {2, .3}, {3, .45}, {4, .6},
                                        {5, .7}, {6, .9}, {7, .8},  {8, .75}};
  const SearchRun r = search(curve, 0.8, range(1, 8, 0.375));  // threshold 0.8·0.625 = 0.5
  EXPECT_EQ(r.result.chosen.value_or(-1), exhaustive_min_k(curve, 0.5));
  EXPECT_EQ(*r.result.chosen, 4);
  // Probes: 8 (.75 in), 4 (.6 in), 2 (.3 out), 3 (.45 out). Sorted: 2 .3, 3 .45, 4 .6, 8 .75: no decrease.
  EXPECT_TRUE(r.result.violations.empty());
  // With the grid's points as known points, the wiggle at 6 > 7 > 8 is seen and reported, not crossing.
  const SearchRun r2 = search(curve, 0.8, range(1, 8, 0.375), {{6, .9}, {7, .8}});
  EXPECT_EQ(*r2.result.chosen, 4) << "known points must not steer the search";
  ASSERT_EQ(r2.result.violations.size(), 2u);
  EXPECT_EQ(r2.result.violations[0].low.keep, 6);
  EXPECT_EQ(r2.result.violations[0].high.keep, 7);
  EXPECT_EQ(r2.result.violations[1].low.keep, 7);
  EXPECT_EQ(r2.result.violations[1].high.keep, 8);
  EXPECT_FALSE(r2.result.violations[0].crosses_threshold);
  EXPECT_NE(r2.result.violations[0].describe().find("K=6"), std::string::npos);
}

TEST(MinK, NonMonotoneWithinSetGivesABoundaryAndReportsTheIslandBelow) {
  // An island within ε at K=2 below a dip at K=3..5; threshold 0.9.
  // K:   1    2    3    4    5    6    7    8
  const std::map<int64_t, double> curve{{1, .5}, {2, .95}, {3, .6},  {4, .7},
                                        {5, .8}, {6, .92}, {7, .95}, {8, 1.0}};
  const SearchRun r = search(curve, 1.0, range(1, 8, 0.1));
  // The true smallest K within ε is 2, but binary search converges to the boundary at 6 (5 out, 6 in) —
  // exactly what the stated rule promises: chosen within ε, the next smaller candidate probed and not.
  EXPECT_EQ(exhaustive_min_k(curve, 0.9), 2);
  ASSERT_TRUE(r.result.chosen);
  EXPECT_EQ(*r.result.chosen, 6);
  std::map<int64_t, bool> within;
  for (const auto& p : r.result.probes) within[p.keep] = p.within;
  EXPECT_TRUE(within.at(6));
  ASSERT_TRUE(within.count(5)) << "the rule needs K−1 probed";
  EXPECT_FALSE(within.at(5));
  // Told about K=2 (e.g. from a grid), the search reports the crossing violation and the smaller K seen.
  const SearchRun r2 = search(curve, 1.0, range(1, 8, 0.1), {{2, .95}});
  EXPECT_EQ(*r2.result.chosen, 6);
  EXPECT_EQ(r2.result.smallest_within_seen.value_or(-1), 2);
  bool crossing = false;
  for (const auto& v : r2.result.violations) crossing = crossing || (v.crosses_threshold && v.low.keep == 2);
  EXPECT_TRUE(crossing);
  // A known point at a K the search probed is not listed twice: the probe is the record.
  const SearchRun r3 = search(curve, 1.0, range(1, 8, 0.1), {{2, .95}, {8, 1.0}});
  ASSERT_EQ(r3.result.known.size(), 1u);
  EXPECT_EQ(r3.result.known[0].keep, 2);
}

TEST(MinK, RandomNonMonotoneCurvesFollowTheRule) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t n = 1 + rng() % 100;
    std::map<int64_t, double> curve;
    for (int64_t k = 1; k <= n; ++k) curve[k] = (rng() % 101) / 100.0;
    const double ref = (rng() % 101) / 100.0;
    const MinKOptions o = range(1, n, (rng() % 50) / 100.0);
    const SearchRun r = search(curve, ref, o);
    const double thr = ref * (1 - o.epsilon) - 1e-12;
    std::map<int64_t, const KProbe*> probed;
    for (const auto& p : r.result.probes) probed[p.keep] = &p;
    if (!r.result.chosen) {
      EXPECT_LT(curve.at(n), thr) << "no answer only when k_max is out";
      continue;
    }
    const int64_t k = *r.result.chosen;
    EXPECT_GE(curve.at(k), thr);
    if (k > 1) {
      ASSERT_TRUE(probed.count(k - 1)) << "trial " << trial;
      EXPECT_LT(curve.at(k - 1), thr);
    }
    // Monotone within-set → the exhaustive answer.
    bool monotone = true;
    bool seen_in = false;
    for (const auto& [kk, a] : curve) {
      if (a >= thr)
        seen_in = true;
      else if (seen_in)
        monotone = false;
    }
    if (monotone) EXPECT_EQ(k, exhaustive_min_k(curve, thr));
    // Violations = adjacent decreasing pairs among the probes, computed here.
    size_t want = 0;
    const KProbe* prev = nullptr;
    for (const auto& [kk, p] : probed) {
      if (prev && prev->accuracy > p->accuracy) ++want;
      prev = p;
    }
    EXPECT_EQ(r.result.violations.size(), want) << "trial " << trial;
  }
}

TEST(MinK, NothingWithinEpsilonAtKMax) {
  const std::map<int64_t, double> curve{{1, .1}, {2, .2}, {3, .3}, {4, .4}};
  const SearchRun r = search(curve, 0.9, range(1, 4, 0.01));
  EXPECT_FALSE(r.result.chosen);
  ASSERT_EQ(r.result.probes.size(), 1u);
  EXPECT_EQ(r.result.probes[0].keep, 4);
}

TEST(MinK, AbsoluteEpsilonAndStepLattice) {
  MinKOptions o;
  o.k_min = 3;
  o.k_max = 20;
  o.k_step = 5;
  EXPECT_EQ(o.candidates(), (std::vector<int64_t>{3, 8, 13, 18, 20}));
  o.absolute = true;
  o.epsilon = 0.05;  // threshold 0.80 − 0.05 = 0.75
  std::map<int64_t, double> curve;
  for (int64_t k = 1; k <= 20; ++k) curve[k] = k >= 10 ? 0.76 : 0.5;
  const SearchRun r = search(curve, 0.80, o);
  EXPECT_EQ(r.result.chosen.value_or(-1), 13) << "smallest lattice K ≥ 10";
  for (const auto& [k, c] : r.calls) EXPECT_TRUE(k == 3 || (k - 3) % 5 == 0 || k == 20) << k;
  EXPECT_DOUBLE_EQ(r.result.threshold, 0.75);
}

TEST(MinK, EpsilonZeroNeedsTheReferenceAccuracy) {
  const std::map<int64_t, double> curve{{1, .3}, {2, .6}, {3, .6}, {4, .6}};
  const SearchRun r = search(curve, 0.6, range(1, 4, 0.0));
  EXPECT_EQ(r.result.chosen.value_or(-1), 2);
}

TEST(MinK, BadOptionsAndAccuraciesAreErrors) {
  const auto f = [](int64_t) { return 0.5; };
  MinKOptions o = range(1, 8, 1.0);
  EXPECT_THROW(min_k_search(f, 0.5, o), InvalidArgument) << "relative ε = 1 drops everything";
  o.epsilon = -0.01;
  EXPECT_THROW(min_k_search(f, 0.5, o), InvalidArgument);
  o = range(5, 4);
  EXPECT_THROW(min_k_search(f, 0.5, o), InvalidArgument);
  o = range(1, 4);
  o.k_step = 0;
  EXPECT_THROW(min_k_search(f, 0.5, o), InvalidArgument);
  EXPECT_THROW(min_k_search(f, 1.5, range(1, 4)), InvalidArgument);
  EXPECT_THROW(min_k_search([](int64_t) { return std::nan(""); }, 0.5, range(1, 4)), InvalidArgument);
  try {
    o = range(1, 8, 1.0);
    min_k_search(f, 0.5, o);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("epsilon must be in [0, 1)"), std::string::npos) << e.what();
  }
}

TEST(MinK, JsonRecordsProbesRuleAndViolations) {
  const std::map<int64_t, double> curve{{1, .5}, {2, .95}, {3, .6}, {4, 1.0}};
  const auto j = search(curve, 1.0, range(1, 4, 0.1), {{3, .6}}).result.to_json();
  EXPECT_EQ(j["probes"][0]["keep"], 4);
  EXPECT_FALSE(j["rule"].get<std::string>().empty());
  EXPECT_FALSE(j["violations"].empty());
  EXPECT_FALSE(j["monotone_in_seen_points"].get<bool>());
}

}  // namespace
}  // namespace vispco::optimize
