// Augmented-Lagrangian penalty and outer updates with per-group multipliers (VisPCO §3.4).
#include "optimize/learned/augmented_lagrangian.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"

namespace vispco::optimize::learned {

void AlOptions::validate() const {
  auto bad = [](const std::string& what, double v) {
    throw InvalidArgument("augmented Lagrangian: " + what + ", got " + std::to_string(v));
  };
  if (!std::isfinite(lambda0)) bad("lambda0 must be finite", lambda0);
  if (!(mu0 > 0) || !std::isfinite(mu0)) bad("mu0 must be > 0", mu0);
  if (!(growth > 1) || !std::isfinite(growth)) bad("growth must be > 1", growth);
  if (!(beta > 0 && beta <= 1)) bad("beta must be in (0, 1]", beta);
  if (!(epsilon > 0)) bad("epsilon must be > 0", epsilon);
  if (patience < 1) bad("patience must be ≥ 1", double(patience));
  if (!(mu_max >= mu0)) bad("mu_max must be ≥ mu0", mu_max);
}

static const JsonFields<AlOptions>& al_options_fields() {
  using T = AlOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<AlOptions> fields("augmented Lagrangian", {
      {"lambda0", &T::lambda0}, {"mu0", &T::mu0}, {"growth", &T::growth}, {"beta", &T::beta},
      {"epsilon", &T::epsilon}, {"patience", &T::patience}, {"mu_max", &T::mu_max}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const AlOptions& o) { return al_options_fields().write(o); }

AlOptions al_options_from_json(const nlohmann::json& j) { return al_options_fields().read_valid(j); }

AugmentedLagrangian::AugmentedLagrangian(int64_t n_groups, AlOptions opts) : opts_(opts) {
  opts_.validate();
  if (n_groups < 1) throw InvalidArgument("augmented Lagrangian: n_groups must be ≥ 1");
  lambda_.assign(n_groups, opts_.lambda0);
  mu_ = opts_.mu0;
}

at::Tensor AugmentedLagrangian::penalty(const at::Tensor& c, const at::Tensor& group) const {
  if (c.dim() != 1 || group.dim() != 1 || c.size(0) != group.size(0) || c.size(0) == 0)
    throw InvalidArgument("augmented Lagrangian: penalty needs c [B] and group [B], B ≥ 1");
  const int64_t G = static_cast<int64_t>(lambda_.size());
  auto g = group.to(at::kLong).cpu();
  if (g.min().item<int64_t>() < 0 || g.max().item<int64_t>() >= G)
    throw InvalidArgument("augmented Lagrangian: group id out of [0, " + std::to_string(G) + ")");
  auto lam = at::tensor(lambda_, at::TensorOptions().dtype(at::kDouble))
                 .index_select(0, g)
                 .to(c.device(), c.scalar_type());
  return (lam * c + 0.5 * mu_ * c * c).mean();
}

AlUpdate AugmentedLagrangian::update(const at::Tensor& c, const at::Tensor& group) {
  if (c.dim() != 1 || group.dim() != 1 || c.size(0) != group.size(0) || c.size(0) == 0)
    throw InvalidArgument("augmented Lagrangian: update needs c [N] and group [N], N ≥ 1");
  auto cd = c.detach().to(at::kCPU, at::kDouble).contiguous();
  auto g = group.to(at::kCPU, at::kLong).contiguous();
  const int64_t G = static_cast<int64_t>(lambda_.size()), N = cd.size(0);
  std::vector<double> sum(G, 0.0);
  std::vector<int64_t> count(G, 0);
  double abs_sum = 0;
  const double* cv = cd.data_ptr<double>();
  const int64_t* gv = g.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    if (gv[i] < 0 || gv[i] >= G) throw InvalidArgument("augmented Lagrangian: group id out of range");
    sum[gv[i]] += cv[i];
    ++count[gv[i]];
    abs_sum += std::abs(cv[i]);
  }
  AlUpdate u;
  u.mean_abs = abs_sum / double(N);
  // LANCELOT-style (Conn, Gould & Toint 1991; Nocedal & Wright Alg. 17.4): a multiplier step λ_g += μ·c̄_g
  // when the violation fell enough (or on the first update), else a penalty step μ ← α·μ with λ kept. The
  // release does both every epoch; with short, stochastic inner solves that lets λ accumulate the noise of
  // unfinished epochs (λ/μ is the offset the inner optimum settles at) and oscillate. At the ceiling of μ the
  // multiplier step needs only that the violation did not grow; when it grew, nothing changes (a hold).
  // Stepping λ by μ·c̄ every epoch at the ceiling, as before, pushed λ to 10⁴–10⁵ and threw a converged
  // predictor off (bundled model, docs/vispco.md).
  const bool at_ceiling = mu_ >= opts_.mu_max;
  const bool progress = history_.empty() || u.mean_abs < opts_.beta * history_.back() ||
                        (at_ceiling && u.mean_abs <= history_.back());
  if (progress) {
    for (int64_t k = 0; k < G; ++k)
      if (count[k] > 0) lambda_[k] += mu_ * sum[k] / double(count[k]);
    u.lambda_updated = true;
  } else if (!at_ceiling) {
    mu_ = std::min(opts_.mu_max, mu_ * opts_.growth);
    u.mu_grew = true;
  }
  history_.push_back(u.mean_abs);
  under_epsilon_ = u.mean_abs < opts_.epsilon ? under_epsilon_ + 1 : 0;
  u.converged = under_epsilon_ >= opts_.patience;
  return u;
}

nlohmann::json AugmentedLagrangian::state_json() const {
  return {{"lambda", lambda_}, {"mu", mu_}, {"history", history_}, {"under_epsilon", under_epsilon_}};
}

void AugmentedLagrangian::load_state_json(const nlohmann::json& j) {
  auto lam = j.at("lambda").get<std::vector<double>>();
  if (lam.size() != lambda_.size())
    throw InvalidArgument("augmented Lagrangian: saved state has " + std::to_string(lam.size()) +
                          " multipliers, expected " + std::to_string(lambda_.size()));
  lambda_ = lam;
  mu_ = j.at("mu").get<double>();
  history_ = j.at("history").get<std::vector<double>>();
  under_epsilon_ = j.at("under_epsilon").get<int64_t>();
}

}  // namespace vispco::optimize::learned
