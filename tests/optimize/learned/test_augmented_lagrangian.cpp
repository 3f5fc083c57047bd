// The Augmented-Lagrangian loop (src/optimize/learned/augmented_lagrangian.h) on a toy problem with a known
// answer: minimise ½‖x − a‖² subject to per-sample equalities c_i(x) = s_i·(v_{g(i)}ᵀx − d_{g(i)}) = 0 in two
// groups. The optimum is the projection of a onto {Vx = d}: x* = a − Vᵀ(VVᵀ)⁻¹(Va − d). Each inner problem is
// quadratic, so one Newton step (gradients from autograd through penalty(), Hessian columns from gradient
// differences) minimises it exactly and the test checks the outer logic alone.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "optimize/learned/augmented_lagrangian.h"

namespace vispco::optimize::learned {
namespace {

struct Toy {
  at::Tensor a = at::tensor({1.0, -2.0, 0.5}, at::kDouble);
  at::Tensor V = at::tensor({1.0, 1.0, 0.0, 0.0, 1.0, -1.0}, at::kDouble).view({2, 3});
  at::Tensor d = at::tensor({0.5, 1.0}, at::kDouble);
  at::Tensor s = at::tensor({1.0, 2.0, 0.5, 1.5, 1.0}, at::kDouble);  // per-sample scales
  at::Tensor group = at::tensor({0L, 0L, 1L, 1L, 1L});

  at::Tensor c(const at::Tensor& x) const {
    return s * ((V.index_select(0, group) * x.unsqueeze(0)).sum(1) - d.index_select(0, group));
  }
  at::Tensor grad(const AugmentedLagrangian& al, const at::Tensor& x0) const {
    auto x = x0.detach().clone().set_requires_grad(true);
    auto loss = 0.5 * (x - a).pow(2).sum() + al.penalty(c(x), group);
    loss.backward();
    return x.grad().detach();
  }
  at::Tensor optimum() const {
    return a - at::matmul(V.t(), at::linalg_solve(at::matmul(V, V.t()), at::matmul(V, a) - d));
  }
};

TEST(AugmentedLagrangian, ToyQuadraticReachesTheConstrainedOptimum) {
  Toy toy;
  AlOptions o;
  o.mu0 = 1.0;
  o.epsilon = 1e-9;
  o.patience = 2;
  AugmentedLagrangian al(2, o);
  auto x = at::zeros({3}, at::kDouble);
  bool converged = false;
  int outer = 0, grew = 0;
  for (; outer < 60 && !converged; ++outer) {
    // Inner minimisation: one exact Newton step on the quadratic augmented Lagrangian.
    auto g = toy.grad(al, x);
    auto H = at::zeros({3, 3}, at::kDouble);
    for (int64_t j = 0; j < 3; ++j) {
      auto e = at::zeros({3}, at::kDouble);
      e[j] = 1.0;
      H.select(1, j).copy_(toy.grad(al, x + e) - g);
    }
    x = x - at::linalg_solve(H, g);
    auto u = al.update(toy.c(x), toy.group);
    grew += u.mu_grew;
    converged = u.converged;
  }
  auto want = toy.optimum();
  const double err = (x - want).abs().max().item<double>();
  std::printf(
      "outer iterations %d, μ grew %d times (μ = %g), λ = [%g, %g], max |x − x*| = %.3e, max |c| = %.3e\n",
      outer, grew, al.mu(), al.lambdas()[0], al.lambdas()[1], err, toy.c(x).abs().max().item<double>());
  EXPECT_TRUE(converged);
  EXPECT_GT(outer, 2) << "a finite penalty alone cannot satisfy the constraint: the multipliers must do it";
  EXPECT_LT(err, 1e-7);
  EXPECT_LT(toy.c(x).abs().max().item<double>(), 1e-8);
  // Stationarity of the Lagrangian: a − x = Σ_i (λ_g s_i / N) v_g at the optimum, so the multipliers are
  // right too.
  auto lam = at::tensor(al.lambdas(), at::kDouble).index_select(0, toy.group) * toy.s / 5.0;
  auto resid = (x - toy.a) + (lam.unsqueeze(1) * toy.V.index_select(0, toy.group)).sum(0);
  EXPECT_LT(resid.abs().max().item<double>(), 1e-6);
}

TEST(AugmentedLagrangian, PenaltyArithmeticAndGrowthRule) {
  AlOptions o;
  o.lambda0 = 0.5;
  o.mu0 = 4.0;
  o.growth = 3.0;
  o.beta = 0.5;
  o.epsilon = 0.01;
  o.patience = 2;
  AugmentedLagrangian al(2, o);
  auto c = at::tensor({0.1, -0.3, 0.2}, at::kDouble);
  auto g = at::tensor({0L, 1L, 1L});
  // mean of λ c + μ/2 c² = (0.05 + 0.02) + (−0.15 + 0.18) + (0.1 + 0.08), over 3.
  EXPECT_NEAR(al.penalty(c, g).item<double>(), (0.07 + 0.03 + 0.18) / 3.0, 1e-12);
  // Per sample: errors of opposite signs in one group still cost their squares.
  EXPECT_NEAR(al.penalty(at::tensor({0.2, -0.2}, at::kDouble), at::tensor({1L, 1L})).item<double>(), 0.08,
              1e-12);
  auto u1 = al.update(c, g);  // first update: no history, μ stays
  EXPECT_FALSE(u1.mu_grew);
  EXPECT_NEAR(u1.mean_abs, 0.2, 1e-12);
  EXPECT_NEAR(al.lambdas()[0], 0.5 + 4.0 * 0.1, 1e-12);
  EXPECT_NEAR(al.lambdas()[1], 0.5 + 4.0 * (-0.05), 1e-12);
  EXPECT_TRUE(u1.lambda_updated);
  auto u2 = al.update(c * 0.6, g);  // 0.12 ≥ 0.5·0.2: not enough decrease, μ grows and λ stays
  EXPECT_TRUE(u2.mu_grew);
  EXPECT_FALSE(u2.lambda_updated);
  EXPECT_DOUBLE_EQ(al.mu(), 12.0);
  EXPECT_NEAR(al.lambdas()[0], 0.9, 1e-12);
  auto u3 = al.update(c * 0.01, g);  // 0.002 < 0.5·0.12 and < ε: a multiplier step with the new μ
  EXPECT_FALSE(u3.mu_grew);
  EXPECT_TRUE(u3.lambda_updated);
  EXPECT_NEAR(al.lambdas()[0], 0.9 + 12.0 * 0.001, 1e-12);
  EXPECT_FALSE(u3.converged);
  EXPECT_TRUE(al.update(c * 0.001, g).converged);  // second time under ε
  // At the ceiling: a violation that grew is a hold (neither λ nor μ moves); one that did not grow, even
  // without the β decrease, is a multiplier step.
  o.mu_max = 12.0;
  AugmentedLagrangian capped(2, o);
  capped.update(c, g);        // first: λ step with μ = 4
  capped.update(c * 0.6, g);  // μ → min(12, 4·3) = 12, the ceiling
  const auto lam = capped.lambdas();
  auto held = capped.update(c * 0.7, g);  // 0.14 > 0.12 at the ceiling
  EXPECT_FALSE(held.mu_grew);
  EXPECT_FALSE(held.lambda_updated);
  EXPECT_EQ(capped.lambdas(), lam);
  EXPECT_DOUBLE_EQ(capped.mu(), 12.0);
  auto step = capped.update(c * 0.65, g);  // 0.13 ≤ 0.14 but ≥ 0.5·0.14: a multiplier step at the ceiling
  EXPECT_TRUE(step.lambda_updated);
  EXPECT_FALSE(step.mu_grew);
  EXPECT_NEAR(capped.lambdas()[0], lam[0] + 12.0 * 0.065, 1e-12);
  AugmentedLagrangian copy(2, o);
  copy.load_state_json(al.state_json());
  EXPECT_EQ(copy.lambdas(), al.lambdas());
  EXPECT_EQ(copy.mu(), al.mu());
  EXPECT_THROW(al.penalty(c, at::tensor({0L, 2L, 1L})), InvalidArgument);
  EXPECT_THROW(AugmentedLagrangian(0, o), InvalidArgument);
  o.growth = 1.0;
  EXPECT_THROW(o.validate(), InvalidArgument);
  EXPECT_EQ(al_options_from_json(to_json(AlOptions{})), AlOptions{});
}

}  // namespace
}  // namespace vispco::optimize::learned
