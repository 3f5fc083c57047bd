// The FLOPs constraint of VisPCO (src/optimize/learned/flops_constraint.h) against cost/flops.h: the relaxed
// A(R) at integer keep counts equals prefill_flops().decoder_total, F_min/F_max/T(b) by hand, the normalised
// constraint and its gradient.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "cost/flops.h"
#include "model/llava/presets.h"
#include "optimize/learned/flops_constraint.h"

namespace vispco::optimize::learned {
namespace {

TEST(FlopsConstraint, PolynomialIsTheCostModel) {
  for (const auto* name : {"tiny", "llava-1.5-7b", "llava-tinyllama-1.1b"}) {
    const auto t = preset_shape(name, 0).flops.decoder;
    auto p = layer_flops_poly(t);
    for (int64_t n : {1, 7, 600, 2000}) {
      const double want = double(decoder_layer_flops(t, n, n).total());
      EXPECT_NEAR(p.at(double(n)), want, 1e-9 * want) << name << " n = " << n;
    }
  }
}

TEST(FlopsConstraint, RelaxedFlopsAtIntegerCountsEqualPrefillFlops) {
  const auto cfg = preset_shape("llava-1.5-7b", 0);  // N_v = 576, 32 layers
  FlopsConstraint fc(cfg, 1, BudgetFloor::kScorer);
  const int64_t L = 32, n_v = 576;
  std::vector<int64_t> counts(L, n_v);
  for (int64_t i = 2; i < L; ++i) counts[i] = i < 16 ? 288 : 72;  // a two-stage plan
  auto R = at::zeros({2, L}, at::kDouble);
  for (int64_t i = 0; i < L; ++i) R[0][i] = double(counts[i]) / n_v;
  R[1].fill_(1.0);
  auto n_text = at::tensor({35L, 50L});
  auto A = fc.relaxed_flops(n_text, R);
  std::vector<int64_t> tokens;
  for (auto c : counts) tokens.push_back(35 + c);
  const double want0 = double(prefill_flops(cfg.flops, tokens).decoder_total);
  const double want1 =
      double(prefill_flops(cfg.flops, unpruned_tokens_per_layer(cfg.flops, 50)).decoder_total);
  std::printf("A(plan) = %.6e (cost model %.6e), A(full) = %.6e (cost model %.6e)\n", A[0].item<double>(),
              want0, A[1].item<double>(), want1);
  EXPECT_NEAR(A[0].item<double>(), want0, 1e-12 * want0);
  EXPECT_NEAR(A[1].item<double>(), want1, 1e-12 * want1);
  EXPECT_EQ(fc.decoder_flops(35, counts), prefill_flops(cfg.flops, tokens).decoder_total);
  EXPECT_NEAR(fc.max_flops(n_text)[1].item<double>(), want1, 1e-12 * want1);
}

TEST(FlopsConstraint, BudgetArithmeticByHand) {
  const auto cfg = preset_shape("tiny", 0);  // 4 layers, N_v = 16
  const auto& t = cfg.flops.decoder;
  auto F = [&](int64_t n) { return double(decoder_layer_flops(t, n, n).total()); };
  const int64_t nt = 9;
  auto n_text = at::tensor({nt});
  FlopsConstraint text(cfg, 1, BudgetFloor::kText), scorer(cfg, 1, BudgetFloor::kScorer);
  const double fmax = 4 * F(nt + 16), fmin_text = 4 * F(nt), fmin_scorer = F(nt + 16) + 3 * F(nt);
  EXPECT_DOUBLE_EQ(text.max_flops(n_text).item<double>(), fmax);
  EXPECT_DOUBLE_EQ(text.min_flops(n_text).item<double>(), fmin_text);
  EXPECT_DOUBLE_EQ(scorer.min_flops(n_text).item<double>(), fmin_scorer);
  auto b = at::tensor({0.3});
  EXPECT_DOUBLE_EQ(scorer.target_flops(n_text, b).item<double>(), fmin_scorer + 0.3 * (fmax - fmin_scorer));
  // A plan keeping 8 tokens from layer 1 on: c = (A − T) / (F_max − F_min).
  auto R = at::tensor({1.0, 0.5, 0.5, 0.5}).view({1, 4});
  const double A = F(nt + 16) + 3 * F(nt + 8);
  const double c_want = (A - (fmin_scorer + 0.3 * (fmax - fmin_scorer))) / (fmax - fmin_scorer);
  EXPECT_NEAR(scorer.constraint(n_text, R, b).item<double>(), c_want, 1e-12);
  // Achieved budget of that plan gives c = 0.
  const double b_hit = (A - fmin_scorer) / (fmax - fmin_scorer);
  EXPECT_NEAR(scorer.constraint(n_text, R, at::tensor({b_hit})).item<double>(), 0.0, 1e-12);
  // Gradient: ∂c/∂R_i = N_v · F'(n_i) / (F_max − F_min), F'(n) = a + 2cn.
  auto Rg = R.clone().set_requires_grad(true);
  scorer.constraint(n_text, Rg, b).sum().backward();
  const auto p = scorer.poly();
  for (int64_t i = 0; i < 4; ++i) {
    const double n = nt + 16 * R[0][i].item<double>();
    const double want = 16 * (p.linear + 2 * p.quadratic * n) / (fmax - fmin_scorer);
    EXPECT_NEAR(Rg.grad()[0][i].item<double>(), want, 1e-9 * std::abs(want)) << "layer " << i;
  }
  EXPECT_THROW(FlopsConstraint(cfg, 4, BudgetFloor::kText), InvalidArgument);
  EXPECT_THROW(parse_budget_floor("none"), InvalidArgument);
}

}  // namespace
}  // namespace vispco::optimize::learned
