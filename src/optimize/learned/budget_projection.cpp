// R → R^α with A(R^α) = T(b), by bisection per sample.
#include "optimize/learned/budget_projection.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "core/errors.h"

namespace vispco::optimize::learned {

at::Tensor project_to_budget(const FlopsConstraint& fc, const at::Tensor& n_text, const at::Tensor& fractions,
                             const at::Tensor& budget) {
  if (fractions.dim() != 2 || fractions.size(1) != fc.n_layers() || n_text.dim() != 1 || budget.dim() != 1 ||
      n_text.size(0) != fractions.size(0) || budget.size(0) != fractions.size(0))
    throw InvalidArgument("budget projection: expected n_text [B], fractions [B, " +
                          std::to_string(fc.n_layers()) + "] and budget [B]");
  at::NoGradGuard no_grad;
  auto R = fractions.detach().to(at::kCPU, at::kDouble);
  if (R.numel() > 0 && !(R.min().item<double>() >= 0 && R.max().item<double>() <= 1))
    throw InvalidArgument("budget projection: keep fractions must lie in [0, 1]");
  R = R.clamp_min(1e-12);
  auto nt = n_text.to(at::kCPU, at::kLong);
  auto b = budget.to(at::kCPU, at::kDouble);
  auto logR = R.log();
  // Bisection on t = log α: c(t) = constraint of R^exp(t) is non-increasing in t.
  auto lo = at::full({R.size(0)}, -30.0 * std::log(2.0), at::kDouble);
  auto hi = at::full({R.size(0)}, 30.0 * std::log(2.0), at::kDouble);
  for (int it = 0; it < 100; ++it) {
    auto mid = 0.5 * (lo + hi);
    auto c = fc.constraint(nt, (logR * mid.exp().unsqueeze(1)).exp(), b);
    auto over = c > 0;  // still over budget: prune harder
    lo = at::where(over, mid, lo);
    hi = at::where(over, hi, mid);
  }
  return (logR * (0.5 * (lo + hi)).exp().unsqueeze(1)).exp().to(at::kFloat);
}

}  // namespace vispco::optimize::learned
