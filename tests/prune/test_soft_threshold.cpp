// The soft-threshold selector (src/prune/soft_threshold.h): the forward value is the hard mask keeping ≈ K
// tokens; the backward gradient with respect to the relaxed count K equals the derivative of the soft
// (sigmoid) path, checked against central finite differences of that path.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "prune/scorers/scorers.h"
#include "prune/soft_threshold.h"

namespace vispco {
namespace {

struct Fixture {
  at::Tensor scores, alive, weights;
  Fixture() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    scores = at::randn({3, 24}, gen) * 2.0;
    alive = at::ones({3, 24}, at::kBool);
    alive[1].narrow(0, 0, 6).fill_(false);  // row 1: six tokens already pruned
    weights = at::randn({3, 24}, gen);
  }
};

// The threshold is a Gaussian-weighted mean of the sorted scores around rank K − ½, so the hard mask keeps K
// tokens up to one (the release, centred on rank K, keeps K or K + 1).
TEST(Ste, ForwardIsTheHardMaskKeepingAboutK) {
  Fixture f;
  SoftThresholdOptions o;
  auto keep = at::tensor({10.0f, 7.0f, 23.0f});
  auto m = soft_keep_mask(f.scores, f.alive, keep, o);
  EXPECT_EQ(at::equal(m.ste, m.hard), true);
  EXPECT_EQ((m.hard * f.alive.logical_not().to(at::kFloat)).sum().item<double>(), 0.0)
      << "a dead token was kept";
  auto kept = m.hard.sum(1);
  for (int64_t b = 0; b < 3; ++b) {
    std::printf("row %ld: K = %.0f, kept %.0f\n", (long)b, keep[b].item<double>(), kept[b].item<double>());
    EXPECT_NEAR(kept[b].item<double>(), keep[b].item<double>(), 1.0);
  }
  // The kept tokens are the top-scoring alive ones.
  for (int64_t b = 0; b < 3; ++b) {
    auto s = f.scores[b].masked_fill(f.alive[b].logical_not(), -1e9);
    const double lowest_kept = s.masked_fill(m.hard[b] < 0.5, 1e9).min().item<double>();
    const double highest_dropped = s.masked_fill(m.hard[b] > 0.5, -1e9).max().item<double>();
    EXPECT_GT(lowest_kept, highest_dropped) << "row " << b;
  }
}

// Surrogate loss of the soft path at a fixed outer gradient g: ℓ(K) = Σ g ⊙ soft(K). The STE's gradient of
// any loss is ⟨∂loss/∂mask at the hard mask, ∂soft/∂K⟩, i.e. the derivative of this surrogate with g = that
// gradient.
double soft_surrogate(const Fixture& f, const at::Tensor& g, const at::Tensor& keep,
                      const SoftThresholdOptions& o) {
  at::NoGradGuard no_grad;
  return (g * soft_keep_mask(f.scores, f.alive, keep, o).soft).sum().item<double>();
}

TEST(Ste, GradientMatchesFiniteDifferencesOfTheSoftPath) {
  Fixture f;
  SoftThresholdOptions o;
  o.temperature = 0.5;  // a smooth soft path so that central differences are accurate
  for (double k0 : {5.3, 9.7, 14.2}) {
    auto keep = at::full({3}, k0, at::kDouble).to(at::kFloat).set_requires_grad(true);
    auto m = soft_keep_mask(f.scores, f.alive, keep, o);
    // A non-linear loss of the mask: its gradient at the hard mask is the outer gradient g.
    auto loss = (f.weights * m.ste).sum() + 0.5 * (m.ste.sum(1) - 8.0).pow(2).sum();
    loss.backward();
    auto g = (f.weights + (m.hard.sum(1, true) - 8.0)).detach();  // ∂loss/∂mask evaluated at the hard mask
    const double h = 1e-2;
    for (int64_t b = 0; b < 3; ++b) {
      auto e = at::zeros({3});
      e[b] = h;
      auto base = keep.detach();
      // Only row b's count moves; the surrogate is a sum over rows, so its difference is row b's derivative.
      const double fd = (soft_surrogate(f, g, base + e, o) - soft_surrogate(f, g, base - e, o)) / (2 * h);
      const double ag = keep.grad()[b].item<double>();
      std::printf("K = %.1f row %ld: autograd %.6f, finite difference %.6f\n", k0, (long)b, ag, fd);
      EXPECT_NEAR(ag, fd, 1e-3 + 1e-2 * std::abs(fd));
    }
  }
}

TEST(Ste, ScoresAndOptions) {
  // FastV scores: head mean, min–max over alive tokens, log.
  auto attn = at::zeros({1, 2, 1, 6});
  attn[0][0][0] = at::tensor({0.1f, 0.2f, 0.3f, 0.0f, 0.1f, 0.3f});
  attn[0][1][0] = at::tensor({0.1f, 0.0f, 0.1f, 0.2f, 0.3f, 0.1f});
  auto vis = at::tensor({1L, 2L, 3L, 4L}).view({1, 4});
  auto alive = at::tensor({1L, 1L, 1L, 0L}).view({1, 4}).to(at::kBool);
  auto s = threshold_scores(fastv_scores(attn, vis), alive);  // head means 0.1, 0.2, 0.1, (0.2 dead)
  EXPECT_NEAR(s[0][1].item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(s[0][0].item<double>(), std::log(1e-8), 1e-3);
  EXPECT_NEAR(s[0][3].item<double>(), std::log(1e-8), 1e-3);
  SoftThresholdOptions o;
  EXPECT_EQ(soft_threshold_options_from_json(to_json(o)), o);
  o.width = 0;
  EXPECT_THROW(o.validate(), InvalidArgument);
  EXPECT_THROW(soft_keep_mask(at::zeros({2, 3}), at::ones({2, 4}, at::kBool), at::zeros({2}), {}),
               InvalidArgument);
}

}  // namespace
}  // namespace vispco
