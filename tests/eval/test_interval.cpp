// Wilson score interval against the published values of Newcombe (Stat. Med. 1998, Table I, method 3).
#include <gtest/gtest.h>

#include "core/errors.h"
#include "eval/interval.h"

namespace vispco::eval {
namespace {

TEST(WilsonInterval, MatchesNewcombesTable) {
  struct Row {
    size_t x, n;
    double lower, upper;
  };
  for (const Row& r : {Row{81, 263, 0.2553, 0.3662}, Row{15, 148, 0.0624, 0.1605}, Row{0, 20, 0.0, 0.1611},
                       Row{1, 29, 0.0061, 0.1718}}) {
    const auto ci = wilson_interval(static_cast<double>(r.x) / static_cast<double>(r.n), r.n);
    EXPECT_NEAR(ci.lower, r.lower, 6e-5) << r.x << "/" << r.n;
    EXPECT_NEAR(ci.upper, r.upper, 6e-5) << r.x << "/" << r.n;
  }
}

TEST(WilsonInterval, StaysInsideTheUnitIntervalAndRejectsBadInput) {
  const auto all = wilson_interval(1.0, 50);
  EXPECT_LT(all.lower, 1.0);
  EXPECT_DOUBLE_EQ(all.upper, 1.0);
  const auto none = wilson_interval(0.5, 0);
  EXPECT_DOUBLE_EQ(none.lower, 0.0);
  EXPECT_DOUBLE_EQ(none.upper, 1.0);
  EXPECT_THROW(wilson_interval(1.2, 10), InvalidArgument);
  EXPECT_THROW(wilson_interval(0.5, 10, 0.0), InvalidArgument);
}

}  // namespace
}  // namespace vispco::eval
