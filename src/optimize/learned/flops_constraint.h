// The FLOPs side of VisPCO (Ji et al., ACL 2026, §3.1): relaxed decoder prefill FLOPs A(R) of keep fractions
// R, the budget target T(b) = F_min + b·(F_max − F_min), and the per-sample equality constraint A(R) = T(b).
// Per-layer FLOPs come from cost/flops.h (decoder_layer_flops at n queries over n keys), written as the exact
// polynomial F(n) = a·n + c·n² so that A(R) is differentiable in R. Units: FLOPs (multiply–add = 2), fp64.
// Only the decoder layers are counted: vision tower, projector and LM head do not depend on the plan.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.h"

namespace vispco::optimize::learned {

/// One decoder layer's prefill FLOPs as a polynomial in its token count n (queries = keys = n).
struct LayerFlopsPoly {
  double linear = 0;     ///< a: projections + MLP per token
  double quadratic = 0;  ///< c: attention per query–key pair
  /// F(n) = a·n + c·n² for a tensor of (relaxed) counts, any shape, fp64.
  at::Tensor operator()(const at::Tensor& n) const;
  /// F(n) for one count.
  double at(double n) const { return linear * n + quadratic * n * n; }
};

/// Fits the polynomial to decoder_layer_flops(t, n, n).total() at n = 1, 2 and checks it at n = 3 and 1000.
/// @throws ConfigError when the cost model is not of that form (it would need a new fit here).
LayerFlopsPoly layer_flops_poly(const DecoderFlopsSpec& t);

/// Where the budget's zero lies.
enum class BudgetFloor {
  kText,    ///< F_min = L·F(N_t): no visual token in any layer (the paper's definition)
  kScorer,  ///< F_min = f·F(N_t + N_v) + (L − f)·F(N_t), f = first prunable layer: the cheapest plan the
            ///< scorer can reach (FastV sees every token in layer 0), so every b ∈ [0, 1] is reachable
};
/// "text" | "scorer". @throws InvalidArgument naming the valid names.
BudgetFloor parse_budget_floor(const std::string& name);
std::string budget_floor_name(BudgetFloor f);

/// The FLOPs model of one decoder bound to a scorer's first prunable layer.
class FlopsConstraint {
 public:
  /// @param first_layer first layer whose input can be pruned, in [0, L). @throws InvalidArgument,
  /// ConfigError.
  FlopsConstraint(const ModelShape& shape, int64_t first_layer, BudgetFloor floor);

  /// Relaxed decoder FLOPs A(R) = Σ_i F(N_t + N_v·R_i), differentiable in R.
  /// @param n_text [B] text tokens per sample (BOS included, placeholder excluded), any numeric dtype
  /// @param fractions [B, L] keep fractions. @return [B] fp64 FLOPs.
  at::Tensor relaxed_flops(const at::Tensor& n_text, const at::Tensor& fractions) const;
  /// F_max = L·F(N_t + N_v) per sample, [B] fp64.
  at::Tensor max_flops(const at::Tensor& n_text) const;
  /// F_min per the floor, [B] fp64.
  at::Tensor min_flops(const at::Tensor& n_text) const;
  /// T(b) = F_min + b·(F_max − F_min). @param budget [B] in [0, 1]. @return [B] fp64.
  at::Tensor target_flops(const at::Tensor& n_text, const at::Tensor& budget) const;
  /// The normalised per-sample constraint c = (A(R) − T(b)) / (F_max − F_min), dimensionless, [B] fp64:
  /// 0 on budget, +0.01 = over budget by 1% of the pruneable range. Differentiable in `fractions`.
  at::Tensor constraint(const at::Tensor& n_text, const at::Tensor& fractions,
                        const at::Tensor& budget) const;
  /// Exact integer decoder FLOPs of one sample with `counts` visual tokens entering each layer, from
  /// cost/flops.h prefill_flops().decoder_total. @throws InvalidArgument for a wrong number of layers.
  int64_t decoder_flops(int64_t n_text, const std::vector<int64_t>& counts) const;

  const LayerFlopsPoly& poly() const { return poly_; }
  int64_t n_layers() const { return n_layers_; }
  int64_t n_visual() const { return n_visual_; }
  int64_t first_layer() const { return first_; }
  BudgetFloor floor() const { return floor_; }

 private:
  ModelShape shape_;
  LayerFlopsPoly poly_;
  int64_t n_layers_ = 0, n_visual_ = 0, first_ = 0;
  BudgetFloor floor_ = BudgetFloor::kScorer;
};

}  // namespace vispco::optimize::learned
