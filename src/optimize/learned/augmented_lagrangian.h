// The Augmented-Lagrangian method for VisPCO's equality constraint (Ji et al., ACL 2026, §3.4; Nocedal &
// Wright, Numerical Optimization, §17.3): minimise f(φ) subject to c_i(φ) = 0 for every sample i by
// minimising
//   L(φ) = f(φ) + mean_i [ λ_{g(i)}·c_i + (μ/2)·c_i² ]
// over φ for an epoch, then, on a validation split: when mean_i |c_i| fell below β × its previous value (or
// on the first update), a multiplier step λ_g ← λ_g + μ·mean_{i∈g} c_i; otherwise a penalty step μ ← α·μ
// (LANCELOT's rule, Nocedal & Wright Alg. 17.4; at the ceiling μ_max a multiplier step when the violation did
// not grow, else a hold: nothing changes; the release takes both steps every epoch). Per sample: the
// quadratic term is summed over samples (a batch whose errors have opposite signs is still penalised), and
// each constraint group (a budget value) has its own multiplier, so over- and under-shooting budgets do not
// cancel in λ either. The release keeps one scalar λ and penalises the batch sum of the errors. Stops when
// mean_i |c_i| < ε for `patience` epochs in a row.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace vispco::optimize::learned {

/// Settings (a plain value: defaults, validate(), JSON round trip, equality over all fields).
struct AlOptions {
  /// Initial multiplier λ₀ of every group (any finite value). Release: w = 1 in TFLOPs units behind a 0.1
  /// factor; ours acts on the normalised constraint, so 0.
  double lambda0 = 0.0;
  /// Initial penalty μ₀ > 0. Release σ = 100 on the error in TFLOPs; on LLaVA-1.5-7B, F_max − F_min ≈ 7
  /// TFLOPs, so that is ≈ 5000 on our normalised constraint. What matters is μ against the KL term (×
  /// kl_weight = 1000): with μ₀ = 10 the KL term won, the predictor drifted to keeping every token and
  /// ignored the budget (validation mean|c| 0.23 after 6 epochs on a trial model); with 1000 mean|c| fell to
  /// 0.02 in 10 epochs there. On the bundled model the same defaults did not converge (docs/vispco.md): see
  /// mu_max.
  double mu0 = 1000.0;
  /// Penalty growth α > 1 when the violation did not shrink enough. Release: 5 (run script; 2 in main.py).
  /// Our epochs are short and stochastic, so the gentler 2.
  double growth = 2.0;
  /// Sufficient-decrease ratio β in (0, 1]: μ grows when mean|c| ≥ β·(previous mean|c|). Release 0.5.
  double beta = 0.5;
  /// Tolerance ε > 0 on mean_i |c_i| (normalised units: 0.01 = 1% of the pruneable FLOPs range). Release 0.01
  /// (TFLOPs).
  double epsilon = 0.005;
  /// Epochs in a row under ε before stopping, ≥ 1. Release 3.
  int64_t patience = 3;
  /// Ceiling of μ, ≥ mu0. No ceiling in the release. At the ceiling λ steps only when the violation did not
  /// grow, else λ and μ hold. (A multiplier step at the ceiling after every epoch, as vispco did before,
  /// moved λ to 10⁴–10⁵ against a KL term of ~1–40 and threw a converged predictor off on the bundled model:
  /// docs/vispco.md.)
  double mu_max = 1e5;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const AlOptions&) const = default;
};
nlohmann::json to_json(const AlOptions& o);
/// @throws InvalidArgument for unknown keys or bad values.
AlOptions al_options_from_json(const nlohmann::json& j);

/// What one outer update did.
struct AlUpdate {
  double mean_abs = 0;          ///< mean_i |c_i| on the validation split
  bool lambda_updated = false;  ///< λ took a step (violation fell by β, or at the ceiling did not grow)
  bool mu_grew = false;         ///< μ was multiplied by α (it did not; neither flag: a hold at the ceiling)
  bool converged = false;       ///< mean |c| < ε for `patience` updates in a row: stop
};

/// State of the method: one multiplier per constraint group, a shared penalty, the violation history.
class AugmentedLagrangian {
 public:
  /// @param n_groups constraint groups (≥ 1), e.g. the training budget values. @throws InvalidArgument.
  AugmentedLagrangian(int64_t n_groups, AlOptions opts);

  /// The constraint terms of the loss, mean_i [λ_{g(i)} c_i + (μ/2) c_i²], differentiable in c.
  /// @param c [B] per-sample constraint values (any float dtype) @param group [B] int64 in [0, n_groups).
  /// @return scalar, dtype of c. @throws InvalidArgument for mismatched shapes or a group out of range.
  at::Tensor penalty(const at::Tensor& c, const at::Tensor& group) const;

  /// The outer update from the validation split's constraint values.
  /// @param c [N] per-sample values (detached) @param group [N] int64. A group without samples keeps its λ.
  AlUpdate update(const at::Tensor& c, const at::Tensor& group);

  const std::vector<double>& lambdas() const { return lambda_; }
  double mu() const { return mu_; }
  const std::vector<double>& history() const { return history_; }  ///< mean |c| of every update
  const AlOptions& options() const { return opts_; }
  /// {"lambda": [...], "mu", "history": [...], "under_epsilon"} for checkpoints and broadcast.
  nlohmann::json state_json() const;
  /// Restores state_json(). @throws InvalidArgument when the group count differs.
  void load_state_json(const nlohmann::json& j);

 private:
  AlOptions opts_;
  std::vector<double> lambda_;
  double mu_ = 0;
  std::vector<double> history_;
  int64_t under_epsilon_ = 0;
};

}  // namespace vispco::optimize::learned
