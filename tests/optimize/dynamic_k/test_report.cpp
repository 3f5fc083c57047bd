// The dynamic-K report's comparison with the static curve says "fewer" or "more" by the sign of the saving;
// expected percentages worked out by hand.
#include <gtest/gtest.h>

#include <string>

#include "optimize/dynamic_k/dynamic_k.h"

namespace vispco::optimize {
namespace {

std::string report_with(double dynamic_flops, double static_flops_at_same_accuracy) {
  DynamicKReport r;
  r.test_dynamic.flops_ratio = dynamic_flops;
  r.static_flops_at_dynamic_accuracy = static_flops_at_same_accuracy;
  return r.to_markdown();
}

TEST(DynamicKReport, SaysFewerWhenDynamicSavesFlopsAndMoreWhenItCostsThem) {
  // 1 − 0.339 / 0.528 = 0.3580: the recipe-4 model's measurement (docs/dynamic-k.md).
  const auto saves = report_with(0.339, 0.528);
  EXPECT_NE(saves.find("(dynamic uses 35.8 % fewer)"), std::string::npos) << saves;
  // 1 − 0.460 / 0.270 = −0.7037: dynamic needs more FLOPs than the static curve for its accuracy.
  const auto costs = report_with(0.460, 0.270);
  EXPECT_NE(costs.find("(dynamic uses 70.4 % more)"), std::string::npos) << costs;
  EXPECT_EQ(costs.find("-70"), std::string::npos) << costs;
}

}  // namespace
}  // namespace vispco::optimize
