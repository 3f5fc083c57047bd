// Stage-1 patch loss: foreground and background means are weighted equally, checked against
// cross-entropies written out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "train/losses/patch_head_loss.h"

namespace vispco::train {
namespace {

double ce(std::initializer_list<double> logits, int label) {
  double z = 0;
  for (double l : logits) z += std::exp(l);
  return std::log(z) - *(logits.begin() + label);
}

TEST(BalancedPatchLoss, AveragesForegroundAndBackgroundMeans) {
  // Three background patches (label 0), one foreground patch (label 2).
  auto logits =
      at::tensor({2.0, 0.0, 0.0, 1.0, 0.5, 0.0, 3.0, 0.0, 1.0, 0.0, 0.0, 0.2}, at::kFloat).view({4, 3});
  auto labels = at::tensor({0, 0, 0, 2}, at::kLong);
  const double bg = (ce({2, 0, 0}, 0) + ce({1, 0.5, 0}, 0) + ce({3, 0, 1}, 0)) / 3;
  const double fg = ce({0, 0, 0.2}, 2);
  EXPECT_NEAR(balanced_patch_loss(logits, labels).item<double>(), 0.5 * (bg + fg), 1e-5);
  // A plain mean would weight the one foreground patch by 1/4, not 1/2.
  EXPECT_GT(std::abs((3 * bg + fg) / 4 - 0.5 * (bg + fg)), 0.1);
}

TEST(BalancedPatchLoss, UsesTheOneKindPresent) {
  auto logits = at::tensor({2.0, 0.0, 1.0, 0.5}, at::kFloat).view({2, 2});
  auto labels = at::zeros({2}, at::kLong);
  EXPECT_NEAR(balanced_patch_loss(logits, labels).item<double>(), (ce({2, 0}, 0) + ce({1, 0.5}, 0)) / 2,
              1e-5);
}

}  // namespace
}  // namespace vispco::train
