// Paired confidence bounds on accuracy loss against closed forms and a direct binomial sum, and the
// ε-coverage experiment on a synthetic pool whose true losses are known.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "optimize/confidence.h"
#include "optimize/epsilon_coverage.h"

namespace vispco::optimize {
namespace {

// P(X ≤ x), X ~ Binomial(m, q), by the textbook sum with binomial coefficients from Pascal's rule.
double cdf(size_t x, size_t m, double q) {
  std::vector<double> c(m + 1, 0.0);
  c[0] = 1;
  for (size_t i = 1; i <= m; ++i)
    for (size_t k = i; k >= 1; --k) c[k] += c[k - 1];
  double s = 0;
  for (size_t k = 0; k <= x; ++k) s += c[k] * std::pow(q, double(k)) * std::pow(1 - q, double(m - k));
  return s;
}

TEST(Confidence, ClopperPearsonMatchesClosedFormsAndTheBinomialSum) {
  EXPECT_NEAR(clopper_pearson_upper(0, 10, 0.95), 1 - std::pow(0.05, 0.1), 1e-9);  // x = 0: 1 − α^(1/m)
  EXPECT_NEAR(clopper_pearson_upper(0, 64, 0.95), 0.045730, 1e-5);                 // 1 − exp(ln 0.05 / 64)
  EXPECT_DOUBLE_EQ(clopper_pearson_upper(10, 10, 0.9), 1.0);
  const double u = clopper_pearson_upper(3, 10, 0.9);
  EXPECT_NEAR(cdf(3, 10, u), 0.1, 1e-9);
  EXPECT_GT(u, 0.3);
  EXPECT_DOUBLE_EQ(clopper_pearson_lower(0, 10, 0.9), 0.0);
  EXPECT_NEAR(clopper_pearson_lower(10, 10, 0.95), std::pow(0.05, 0.1), 1e-9);  // x = m: α^(1/m)
  EXPECT_THROW(clopper_pearson_upper(4, 3, 0.9), InvalidArgument);
  EXPECT_THROW(clopper_pearson_upper(1, 3, 1.0), InvalidArgument);
}

TEST(Confidence, PairedBoundByHand) {
  // 5 samples: one lost (index 1), one gained (index 4).
  const auto b = paired_loss_bound({1, 1, 1, 1, 0}, {1, 0, 1, 1, 1}, 0.9);
  EXPECT_EQ(b.lost, 1u);
  EXPECT_EQ(b.gained, 1u);
  EXPECT_DOUBLE_EQ(b.loss, 0.0);
  EXPECT_EQ(b.method, "clopper-pearson-paired");
  // U_b: P(X ≤ 1 | 5, q) = 0.05; L_c: P(X ≥ 1 | 5, q) = 0.05 → 1 − (1 − q)^5 = 0.05.
  const double lc = 1 - std::pow(0.95, 0.2);
  EXPECT_NEAR(cdf(1, 5, b.upper + lc), 0.05, 1e-9);
  // Nothing lost, nothing gained: the bound is still positive (the conditional McNemar bound would be 0).
  const auto same = paired_loss_bound(std::vector<double>(64, 1.0), std::vector<double>(64, 1.0), 0.9);
  EXPECT_NEAR(same.upper, 1 - std::pow(0.05, 1.0 / 64), 1e-9);
  // Soft scores: bootstrap, at least the point estimate.
  const auto soft = paired_loss_bound({1, 0.6, 0.3, 1}, {0.6, 0.6, 0.3, 0.3}, 0.9);
  EXPECT_EQ(soft.method, "paired-bootstrap");
  EXPECT_NEAR(soft.loss, 1.1 / 4, 1e-12);
  EXPECT_GE(soft.upper, soft.loss);
  EXPECT_THROW(paired_loss_bound({1}, {1, 0}, 0.9), InvalidArgument);
  EXPECT_THROW(paired_loss_bound({}, {}, 0.9), InvalidArgument);
  EXPECT_TRUE(loss_within(0.005, 0.01, false, 0.6));
  EXPECT_FALSE(loss_within(0.007, 0.01, false, 0.6));
  EXPECT_TRUE(loss_within(0.007, 0.01, true, 0.6));
}

// A pool of 2000 samples, all right unpruned; rung 0 (K = 8) loses every 33rd (3 %), rung 1 (K = 16) every
// 200th (0.5 %); the test split is the pool itself, so with ε = 1 % rung 0 always violates and rung 1 never.
LadderTable pool() {
  LadderTable t;
  t.ladder = {8, 16, 32};
  for (size_t i = 0; i < 2000; ++i) {
    t.ids.push_back(std::to_string(i));
    t.families.push_back("f");
    t.score.push_back({i % 33 == 0 ? 0.0 : 1.0, i % 200 == 0 ? 0.0 : 1.0, 1.0});
    t.agree.push_back({1, 1, 1});
    t.llm_flops.push_back({1, 2, 3});
  }
  return t;
}

TEST(EpsilonCoverage, TheBoundKeepsViolationsBelowOneMinusConfidence) {
  const auto t = pool();
  CoverageOptions o;
  o.n_calib = 64;
  o.draws = 1000;
  o.confidence = 0.9;
  const auto r = epsilon_coverage(t, t, o);
  // Point estimate: rung 0 is chosen whenever the 64 drawn samples hold none of its ~61 losses:
  // C(1939, 64) / C(2000, 64) ≈ 0.138.
  double p0 = 1;
  for (int j = 0; j < 64; ++j) p0 *= (2000.0 - 61 - j) / (2000.0 - j);
  EXPECT_NEAR(r.violation_rate_point, p0, 0.035);
  EXPECT_LE(r.violation_rate_bound, 0.1);
  EXPECT_GT(r.mean_keep_bound, r.mean_keep_point);
  o.n_calib = 3000;
  EXPECT_THROW(epsilon_coverage(t, t, o), InvalidArgument);
}

}  // namespace
}  // namespace vispco::optimize
