// VisPCO kernels (src/optimize/learned/kernels.h): monotone non-increasing over layers, limits 1 before the
// steps and Π r_s after, values in (0, 1], layers before the first prunable one untouched, integer plans.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "optimize/learned/kernels.h"

namespace vispco::optimize::learned {
namespace {

KernelConfig config(KernelKind kind, int64_t stages = 3) {
  KernelConfig c;
  c.kind = kind;
  c.n_stages = stages;
  return c;
}

class KernelShape : public ::testing::TestWithParam<KernelKind> {};

TEST_P(KernelShape, MonotoneWithLimitsOnRandomParameters) {
  const auto c = config(GetParam());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  auto raw = 3.0 * at::randn({64, n_kernel_params(c)}, gen);
  const int64_t L = 8;
  auto p = interpret_params(c, raw, L);
  // Dense positions over and far beyond the depth.
  auto pos = at::linspace(-200.0, 200.0, 4001, at::kFloat);
  auto v = kernel_values(c, p, pos);  // [64, 4001]
  ASSERT_EQ(v.sizes(), (std::vector<int64_t>{64, 4001}));
  auto step = v.narrow(1, 1, 4000) - v.narrow(1, 0, 4000);
  EXPECT_LE(step.max().item<double>(), 1e-6) << "kernel increases somewhere";
  EXPECT_LE(v.max().item<double>(), 1.0 + 1e-6);
  EXPECT_GT(v.min().item<double>(), 0.0);
  // Limits: 1 far before, Π r_s far after.
  auto final_ratio = p.r.prod(1);
  const double d_first = (v.select(1, 0) - 1.0).abs().max().item<double>();
  const double d_last = (v.select(1, 4000) - final_ratio).abs().max().item<double>();
  std::printf("max |R(−200) − 1| = %.2e, max |R(200) − Π r| = %.2e\n", d_first, d_last);
  EXPECT_LT(d_first, 1e-5);
  EXPECT_LT(d_last, 1e-5);
  // Parameters in their ranges.
  EXPECT_GE(p.k.min().item<double>(), 0.0);
  EXPECT_LE(p.k.max().item<double>(), double(L));
  EXPECT_GT(p.r.min().item<double>(), 0.0);
  EXPECT_LT(p.r.max().item<double>(), 1.0);
}

TEST_P(KernelShape, FirstLayersKeepEverythingAndGradientsFlow) {
  const auto c = config(GetParam());
  auto raw = at::zeros({3, n_kernel_params(c)}).set_requires_grad(true);
  auto R = keep_fractions(c, raw, 6, 2);
  ASSERT_EQ(R.sizes(), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(R.narrow(1, 0, 2).eq(1.0).all().item<bool>(), true);
  R.narrow(1, 2, 4).sum().backward();
  EXPECT_GT(raw.grad().abs().sum().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(All, KernelShape,
                         ::testing::Values(KernelKind::kStep, KernelKind::kRamp, KernelKind::kMultiStep),
                         [](const auto& info) { return kernel_name(info.param); });

TEST(Kernels, StepMatchesTheReleaseFormula) {
  KernelConfig c = config(KernelKind::kStep);
  KernelParams p;
  p.k = at::tensor({2.5f}).view({1, 1});
  p.r = at::tensor({0.25f}).view({1, 1});
  auto v = kernel_values(c, p, at::arange(6, at::kFloat));
  for (int64_t i = 0; i < 6; ++i) {
    const double want = 1 + (0.25 - 1) / (1 + std::exp(-10.0 * (i - 2.5)));
    EXPECT_NEAR(v[0][i].item<double>(), want, 1e-6) << "layer " << i;
  }
}

TEST(Kernels, RampIsLinearBetweenItsEnds) {
  KernelConfig c = config(KernelKind::kRamp);
  KernelParams p;
  p.k = at::tensor({1.0f}).view({1, 1});
  p.width = at::tensor({4.0f}).view({1, 1});
  p.r = at::tensor({0.2f}).view({1, 1});
  auto v = kernel_values(c, p, at::arange(7, at::kFloat));
  const double want[] = {1, 1, 0.8, 0.6, 0.4, 0.2, 0.2};
  for (int64_t i = 0; i < 7; ++i) EXPECT_NEAR(v[0][i].item<double>(), want[i], 1e-6) << "layer " << i;
}

TEST(Kernels, MultiStepIsAProductOfSteps) {
  KernelConfig c = config(KernelKind::kMultiStep, 2);
  KernelParams p;
  p.k = at::tensor({1.5f, 4.5f}).view({1, 2});
  p.r = at::tensor({0.5f, 0.4f}).view({1, 2});
  auto v = kernel_values(c, p, at::tensor({0.0f, 3.0f, 7.0f}));
  EXPECT_NEAR(v[0][0].item<double>(), 1.0, 1e-5);
  EXPECT_NEAR(v[0][1].item<double>(), 0.5, 1e-5);
  EXPECT_NEAR(v[0][2].item<double>(), 0.2, 1e-5);
  // Zero outputs spread the steps over the depth.
  auto q = interpret_params(c, at::zeros({1, 4}), 8);
  EXPECT_NEAR(q.k[0][0].item<double>(), 2.0, 1e-5);
  EXPECT_NEAR(q.k[0][1].item<double>(), 6.0, 1e-5);
}

TEST(Kernels, CountsAndPlans) {
  auto counts = keep_counts(at::tensor({1.0, 1.0, 0.5, 0.51, 0.25, 0.0}), 16);
  EXPECT_EQ(counts, (std::vector<int64_t>{16, 16, 8, 8, 4, 1}));
  auto plan = plan_from_counts(counts, 16, "fastv");
  EXPECT_EQ(plan.to_string(), "fastv:layer=2,keep=8+fastv:layer=4,keep=4+fastv:layer=5,keep=1");
  EXPECT_TRUE(plan_from_counts({16, 16, 16}, 16, "fastv").empty());
  EXPECT_THROW(plan_from_counts({16, 8, 9}, 16, "fastv"), InvalidArgument);
  EXPECT_THROW(keep_counts(at::tensor({NAN}), 16), InvalidArgument);
}

TEST(Kernels, ConfigErrorsAndJson) {
  EXPECT_THROW(kernel_kind("cosine"), InvalidArgument);
  try {
    kernel_kind("cosine");
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("step, ramp, multistep"), std::string::npos) << e.what();
  }
  KernelConfig c = config(KernelKind::kRamp, 5);
  c.gamma = 7;
  EXPECT_EQ(kernel_config_from_json(to_json(c)), c);
  c.n_stages = 0;
  EXPECT_THROW(c.validate(), InvalidArgument);
  EXPECT_THROW(interpret_params(config(KernelKind::kStep), at::zeros({2, 3}), 4), InvalidArgument);
  EXPECT_THROW(keep_fractions(config(KernelKind::kStep), at::zeros({2, 2}), 4, 4), InvalidArgument);
}

}  // namespace
}  // namespace vispco::optimize::learned
