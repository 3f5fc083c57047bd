// VisPCO kernels (Ji et al., ACL 2026, arXiv 2604.15188, §3.3 "learnable kernel functions"): a few predicted
// parameters → the cumulative keep fraction R_i of visual tokens entering each decoder layer i, so the
// relaxed kept count there is K_i = N_v·R_i (the paper writes N_t + N_v·R_i counting the text too). Three
// kernels: the single soft step of the authors' release, a linear ramp, and the S-stage product of steps
// (multi-step progressive pruning, which the paper reports better). Also the map back to an integer pruning
// plan.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "prune/plan.h"

namespace vispco::optimize::learned {

/// Which kernel shapes R_i. Names in kernel_registry().
enum class KernelKind {
  kStep,       ///< R_i = 1 + (r − 1)·σ(γ(i − k))                       (release; params k, r)
  kRamp,       ///< R_i = 1 + (r − 1)·clamp((i − k)/w, 0, 1)            (params k, w, r)
  kMultiStep,  ///< R_i = Π_s [1 + (r_s − 1)·σ(γ(i − k_s))], s = 1..S  (params k_s, r_s)
};

/// Kernel settings (a plain value: defaults, validate(), JSON round trip, equality over all fields).
struct KernelConfig {
  /// The kernel. Default multi-step (paper §5: better than single-step); the release uses kStep.
  KernelKind kind = KernelKind::kMultiStep;
  /// Steps S of the multi-step kernel, in [1, 8]; ignored by the others. Paper: progressive pruning in a few
  /// stages (PyramidDrop uses 3); default 3.
  int64_t n_stages = 3;
  /// Sharpness γ of the sigmoid steps, layers⁻¹, in (0, 1000]. Release value 10.
  double gamma = 10.0;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const KernelConfig&) const = default;
};
nlohmann::json to_json(const KernelConfig& c);
/// @throws InvalidArgument for unknown keys, bad values or an unknown kernel name.
KernelConfig kernel_config_from_json(const nlohmann::json& j);

/// One row of the kernel registry.
struct KernelEntry {
  std::string name;  ///< "step", "ramp", "multistep"
  KernelKind kind;
  std::string description;  ///< one line, with the source
};
/// The kernel registry (name → kind), in display order.
const std::vector<KernelEntry>& kernel_registry();
/// @throws InvalidArgument listing the valid names.
KernelKind kernel_kind(const std::string& name);
/// The registry name of a kind.
std::string kernel_name(KernelKind kind);

/// Raw parameters the predictor outputs for this kernel: step 2, ramp 3, multistep 2·S.
int64_t n_kernel_params(const KernelConfig& c);

/// Interpreted kernel parameters of a batch.
struct KernelParams {
  at::Tensor
      k;  ///< [B, S] fp32 step positions / ramp start, in layer units, in [0, L] (S = 1 unless multistep)
  at::Tensor r;      ///< [B, S] fp32 per-step keep factors in (0, 1); the final keep fraction is Π_s r_s
  at::Tensor width;  ///< [B, 1] fp32 ramp width in layers (≥ 0.5), ramp only; undefined otherwise
};

/// Maps unconstrained predictor outputs to parameters: k = L·σ(u) (multistep: u shifted by logit((s+½)/S) so
/// that zero outputs spread the S steps over the depth), r = σ(u), ramp width = ½ + softplus(u).
/// @param raw [B, P] fp32, P = n_kernel_params(c) @param n_layers L ≥ 1.
/// @throws InvalidArgument when raw is not [B, P].
KernelParams interpret_params(const KernelConfig& c, const at::Tensor& raw, int64_t n_layers);

/// The kernel evaluated at arbitrary (fractional) layer positions: [B, P'] values in (0, 1].
/// Non-increasing in the position for every kernel; → 1 far before the first step, → Π_s r_s far after.
/// @param positions [P'] fp32 layer positions.
at::Tensor kernel_values(const KernelConfig& c, const KernelParams& p, const at::Tensor& positions);

/// Keep fractions R [B, L] fp32 entering each decoder layer 0..L−1, differentiable in `raw`. Layers before
/// `first_layer` keep everything (R_i = 1): an in-LLM scorer such as FastV cannot act before layer 1.
/// @throws InvalidArgument for a bad raw shape or first_layer outside [0, L).
at::Tensor keep_fractions(const KernelConfig& c, const at::Tensor& raw, int64_t n_layers,
                          int64_t first_layer);

/// Integer kept visual tokens entering each layer from one row of keep fractions: K_i = clamp(round(N_v·R_i),
/// 1, N_v), then made non-increasing (running minimum), as a plan requires.
/// @param fractions [L] (any float dtype) @throws InvalidArgument when n_visual < 1 or a value is NaN.
std::vector<int64_t> keep_counts(const at::Tensor& fractions, int64_t n_visual);

/// The pruning plan that realises `counts` with `scorer`: one stage "scorer:layer=i,keep=K_i" at every layer
/// i where K_i drops below K_{i−1} (K_{−1} = N_v). Empty plan when nothing is pruned.
/// @throws InvalidArgument when the counts increase or leave [1, N_v].
PruningPlan plan_from_counts(const std::vector<int64_t>& counts, int64_t n_visual, const std::string& scorer);

}  // namespace vispco::optimize::learned
