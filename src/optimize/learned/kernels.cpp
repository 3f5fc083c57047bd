// VisPCO kernels (Ji et al., ACL 2026 §3.3): parameter interpretation, evaluation over layers, integer plans.
#include "optimize/learned/kernels.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/named_table.h"

namespace vispco::optimize::learned {

void KernelConfig::validate() const {
  if (n_stages < 1 || n_stages > 8)
    throw InvalidArgument("kernel: n_stages must be in [1, 8], got " + std::to_string(n_stages));
  if (!(gamma > 0 && gamma <= 1000))
    throw InvalidArgument("kernel: gamma must be in (0, 1000], got " + std::to_string(gamma));
}

static const JsonFields<KernelConfig>& kernel_config_fields() {
  using T = KernelConfig;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<KernelConfig> fields("kernel", {
      named("kind", &T::kind, kernel_kind, kernel_name), {"n_stages", &T::n_stages}, {"gamma", &T::gamma}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const KernelConfig& c) { return kernel_config_fields().write(c); }

KernelConfig kernel_config_from_json(const nlohmann::json& j) { return kernel_config_fields().read_valid(j); }

const std::vector<KernelEntry>& kernel_registry() {
  static const std::vector<KernelEntry> table = {
      {"step", KernelKind::kStep, "single soft step R_i = 1 + (r−1)·σ(γ(i−k)) (VisPCO release, §3.3)"},
      {"ramp", KernelKind::kRamp, "linear ramp from 1 at layer k to r at layer k + w"},
      {"multistep", KernelKind::kMultiStep,
       "product of S soft steps: multi-step progressive pruning (VisPCO §5, reported better)"},
  };
  return table;
}

KernelKind kernel_kind(const std::string& name) { return find_named(kernel_registry(), name, "kernel").kind; }

std::string kernel_name(KernelKind kind) {
  for (const auto& e : kernel_registry())
    if (e.kind == kind) return e.name;
  return "?";
}

int64_t n_kernel_params(const KernelConfig& c) {
  switch (c.kind) {
    case KernelKind::kStep:
      return 2;
    case KernelKind::kRamp:
      return 3;
    case KernelKind::kMultiStep:
      return 2 * c.n_stages;
  }
  return 0;
}

KernelParams interpret_params(const KernelConfig& c, const at::Tensor& raw, int64_t n_layers) {
  const int64_t P = n_kernel_params(c);
  if (raw.dim() != 2 || raw.size(1) != P)
    throw InvalidArgument("kernel " + kernel_name(c.kind) + ": raw parameters must be [B, " +
                          std::to_string(P) + "], got [" + std::to_string(raw.dim() > 0 ? raw.size(0) : 0) +
                          ", " + std::to_string(raw.dim() > 1 ? raw.size(1) : 0) + "]");
  if (n_layers < 1) throw InvalidArgument("kernel: n_layers must be ≥ 1, got " + std::to_string(n_layers));
  auto u = raw.to(at::kFloat);
  const double L = static_cast<double>(n_layers);
  KernelParams p;
  switch (c.kind) {
    case KernelKind::kStep:
      p.k = at::sigmoid(u.narrow(1, 0, 1)) * L;
      p.r = at::sigmoid(u.narrow(1, 1, 1));
      break;
    case KernelKind::kRamp:
      p.k = at::sigmoid(u.narrow(1, 0, 1)) * L;
      p.width = 0.5 + at::softplus(u.narrow(1, 1, 1));
      p.r = at::sigmoid(u.narrow(1, 2, 1));
      break;
    case KernelKind::kMultiStep: {
      const int64_t S = c.n_stages;
      std::vector<double> shift(S);
      for (int64_t s = 0; s < S; ++s) {
        const double q = (s + 0.5) / S;
        shift[s] = std::log(q / (1 - q));
      }
      auto offs = at::tensor(shift, u.options()).unsqueeze(0);  // [1, S]
      p.k = at::sigmoid(u.narrow(1, 0, S) + offs) * L;
      p.r = at::sigmoid(u.narrow(1, S, S));
      break;
    }
  }
  return p;
}

at::Tensor kernel_values(const KernelConfig& c, const KernelParams& p, const at::Tensor& positions) {
  auto x = positions.to(at::kFloat).to(p.k.device()).view({1, 1, -1});  // [1, 1, P']
  auto k = p.k.unsqueeze(-1), r = p.r.unsqueeze(-1);                    // [B, S, 1]
  if (c.kind == KernelKind::kRamp) {
    auto t = ((x - k) / p.width.unsqueeze(-1)).clamp(0.0, 1.0);
    return (1 + (r - 1) * t).squeeze(1);
  }
  auto factors = 1 + (r - 1) * at::sigmoid(c.gamma * (x - k));  // [B, S, P']
  return factors.prod(1);
}

at::Tensor keep_fractions(const KernelConfig& c, const at::Tensor& raw, int64_t n_layers,
                          int64_t first_layer) {
  if (first_layer < 0 || first_layer >= n_layers)
    throw InvalidArgument("kernel: first prunable layer must be in [0, " + std::to_string(n_layers) +
                          "), got " + std::to_string(first_layer));
  auto p = interpret_params(c, raw, n_layers);
  auto pos = at::arange(n_layers, at::TensorOptions().dtype(at::kFloat));
  auto R = kernel_values(c, p, pos);  // [B, L]
  if (first_layer == 0) return R;
  auto head = at::ones({R.size(0), first_layer}, R.options());
  return at::cat({head, R.narrow(1, first_layer, n_layers - first_layer)}, 1);
}

std::vector<int64_t> keep_counts(const at::Tensor& fractions, int64_t n_visual) {
  if (n_visual < 1)
    throw InvalidArgument("keep_counts: n_visual must be ≥ 1, got " + std::to_string(n_visual));
  auto f = fractions.detach().to(at::kCPU, at::kDouble).contiguous().view({-1});
  const double* v = f.data_ptr<double>();
  std::vector<int64_t> out(f.numel());
  int64_t prev = n_visual;
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (std::isnan(v[i]))
      throw InvalidArgument("keep_counts: keep fraction of layer " + std::to_string(i) + " is NaN");
    auto k = static_cast<int64_t>(std::llround(v[i] * double(n_visual)));
    k = std::clamp<int64_t>(k, 1, n_visual);
    prev = std::min(prev, k);
    out[i] = prev;
  }
  return out;
}

PruningPlan plan_from_counts(const std::vector<int64_t>& counts, int64_t n_visual,
                             const std::string& scorer) {
  PruningPlan plan;
  int64_t prev = n_visual;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t k = counts[i];
    if (k < 1 || k > prev)
      throw InvalidArgument("plan_from_counts: layer " + std::to_string(i) + " keeps " + std::to_string(k) +
                            " visual tokens; must be in [1, " + std::to_string(prev) + "] (non-increasing)");
    if (k < prev) plan.stages.push_back({static_cast<int64_t>(i), k, scorer, {}});
    prev = k;
  }
  return plan;
}

}  // namespace vispco::optimize::learned
