// Budget projection (src/optimize/learned/budget_projection.h) against cost/flops.h: the projected fractions,
// rounded to an integer plan, cost T(b) = F_min + b·(F_max − F_min) decoder FLOPs with F_min and F_max from
// prefill_flops(), and the projection only bends the predicted shape (R' = R^α with one α per sample).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "cost/flops.h"
#include "model/llava/presets.h"
#include "optimize/learned/budget_projection.h"
#include "optimize/learned/kernels.h"

namespace vispco::optimize::learned {
namespace {

double decoder_flops_at(const ModelShape& cfg, int64_t n_text, const std::vector<int64_t>& counts) {
  std::vector<int64_t> tokens;
  for (auto c : counts) tokens.push_back(n_text + c);
  return double(prefill_flops(cfg.flops, tokens).decoder_total);
}

TEST(BudgetProjection, IntegerPlansLandOnTheBudgetAndKeepTheShape) {
  const auto cfg = preset_shape("llava-1.5-7b", 0);  // N_v = 576, 32 layers
  const int64_t L = 32, n_v = 576, first = 2;
  FlopsConstraint fc(cfg, first, BudgetFloor::kScorer);
  // Three predicted shapes: a late soft step that keeps far too much for b = 0.2, an early steep one that
  // keeps far too little for b = 0.6, and a two-step one; budgets chosen so that α > 1, α < 1 and α ≈ 1 are
  // all needed.
  auto R = at::ones({3, L}, at::kDouble);
  for (int64_t i = first; i < L; ++i) {
    R[0][i] = 1.0 - 0.5 / (1.0 + std::exp(-(i - 20.0)));
    R[1][i] = 0.05;
    R[2][i] = i < 12 ? 0.6 : 0.25;
  }
  auto n_text = at::tensor({35L, 50L, 40L});
  auto budget = at::tensor({0.2, 0.6, 0.3}, at::kDouble);
  auto P = project_to_budget(fc, n_text, R, budget).to(at::kDouble);
  ASSERT_EQ(P.sizes(), R.sizes());
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t nt = n_text[b].item<int64_t>();
    const double bud = budget[b].item<double>();
    std::vector<int64_t> all(L, n_v), floor(L, 0);
    for (int64_t i = 0; i < first; ++i) floor[i] = n_v;
    const double f_max = decoder_flops_at(cfg, nt, all), f_min = decoder_flops_at(cfg, nt, floor);
    const double target = f_min + bud * (f_max - f_min);
    const double got = decoder_flops_at(cfg, nt, keep_counts(P[b], n_v));
    std::printf("sample %ld: b = %.2f, plan FLOPs / target − 1 = %+.5f\n", (long)b, bud, got / target - 1.0);
    // Rounding to whole tokens moves each layer by at most half a token: ≤ 0.5 / (N_t + K) ≈ 0.4 % here.
    EXPECT_LT(std::abs(got / target - 1.0), 0.005) << "sample " << b;
    // Layers before the first prunable one keep everything; one exponent α everywhere else.
    for (int64_t i = 0; i < first; ++i) EXPECT_DOUBLE_EQ(P[b][i].item<double>(), 1.0);
    // α from the layer with the smallest P above 1e-30 (P near 1 loses α's digits in fp32); sample 0 needs a
    // large α, its late layers underflow fp32 and are compared only where P > 1e-30.
    int64_t ref = first;
    for (int64_t i = first; i < L; ++i)
      if (P[b][i].item<double>() > 1e-30 && P[b][i].item<double>() < P[b][ref].item<double>()) ref = i;
    const double alpha = std::log(P[b][ref].item<double>()) / std::log(R[b][ref].item<double>());
    for (int64_t i = first; i < L; ++i)
      if (P[b][i].item<double>() > 1e-30)
        EXPECT_NEAR(std::log(P[b][i].item<double>()), alpha * std::log(R[b][i].item<double>()),
                    1e-5 * std::max(1.0, std::abs(alpha * std::log(R[b][i].item<double>()))));
    if (b == 0) EXPECT_GT(alpha, 1.0);  // kept too much: pruned harder
    if (b == 1) EXPECT_LT(alpha, 1.0);  // kept too little: pruned less
  }
}

TEST(BudgetProjection, UnreachableBudgetsAndBadInput) {
  const auto cfg = preset_shape("llava-1.5-7b", 0);
  FlopsConstraint fc(cfg, 1, BudgetFloor::kScorer);
  // Nothing pruned anywhere: no exponent changes 1, so the fractions stay 1 (the closest reachable plan).
  auto ones = at::ones({1, 32}, at::kFloat);
  auto P = project_to_budget(fc, at::tensor({40L}), ones, at::tensor({0.3}));
  EXPECT_TRUE(at::equal(P, ones));
  EXPECT_THROW(project_to_budget(fc, at::tensor({40L}), at::ones({1, 31}), at::tensor({0.3})),
               InvalidArgument);
  EXPECT_THROW(project_to_budget(fc, at::tensor({40L}), at::full({1, 32}, NAN), at::tensor({0.3})),
               InvalidArgument);
  EXPECT_THROW(project_to_budget(fc, at::tensor({40L}), at::full({1, 32}, 1.5), at::tensor({0.3})),
               InvalidArgument);
  // An underflowed fraction (0) is a valid input: it stays (near) 0, i.e. one token after rounding.
  auto z = at::ones({1, 32}, at::kFloat);
  z.narrow(1, 20, 12).zero_();
  auto Pz = project_to_budget(fc, at::tensor({40L}), z, at::tensor({0.5}));
  EXPECT_TRUE(Pz.isfinite().all().item<bool>());
  EXPECT_EQ(keep_counts(Pz[0], 576).back(), 1);
}

}  // namespace
}  // namespace vispco::optimize::learned
