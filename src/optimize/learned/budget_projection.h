// Budget projection at inference (vispco's addition to VisPCO, Ji et al., ACL 2026, §3.5): the predictor's
// keep fractions R are bent to R^α per sample, with the one α > 0 that puts the relaxed decoder FLOPs exactly
// on the target, A(R^α) = T(b). The predictor chooses the shape (where and how steeply tokens go), the
// projection enforces the budget the user asked for. R^α keeps what a plan needs: R_i = 1 stays 1 (layers
// before the scorer's first one), order across layers is kept (non-increasing stays non-increasing), values
// stay in [0, 1] (a large α can underflow fp32 to 0: one token after rounding). The paper uses the predicted
// fractions as they are; a predictor that misses its budget by a few percent then misses it in deployment too
// (bundled model: −33 % … +72 %, docs/vispco.md).
#pragma once
#include <ATen/core/Tensor.h>

#include "optimize/learned/flops_constraint.h"

namespace vispco::optimize::learned {

/// R^α per sample with A(R^α) = T(b) on the relaxed FLOPs, α found by bisection on log α in [2⁻³⁰, 2³⁰]
/// (A is non-increasing in α). Where the budget is out of reach within that range (e.g. R ≡ 1 everywhere, or
/// a budget under the floor) α stays at the nearer end, so the result is the closest reachable one.
/// @param n_text [B] text tokens per sample @param fractions [B, L] keep fractions in [0, 1] (any float
/// dtype)
/// @param budget [B] budgets b in [0, 1]. @return [B, L] fp32, no autograd.
/// A fraction of 0 (a sigmoid that underflowed) is taken as 10⁻¹²: one token after rounding, as keep_counts.
/// @throws InvalidArgument for mismatched shapes or fractions outside [0, 1] (NaN included).
at::Tensor project_to_budget(const FlopsConstraint& fc, const at::Tensor& n_text, const at::Tensor& fractions,
                             const at::Tensor& budget);

}  // namespace vispco::optimize::learned
