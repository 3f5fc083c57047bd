// Data-dependent initialisation of the projector's first layer.
#include "train/projector_init.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "core/errors.h"

namespace vispco::train {

void standardise_projector_input(LlavaProjector& projector, const at::Tensor& features) {
  auto& lin = projector->linear_1;
  if (!lin->bias.defined()) throw InvalidArgument("standardise_projector_input: linear_1 has no bias");
  const int64_t d_in = lin->weight.size(1);
  if (features.dim() != 3 || features.size(2) != d_in)
    throw InvalidArgument("standardise_projector_input: features must be [B, N_v, " + std::to_string(d_in) +
                          "]");
  auto x = features.reshape({-1, d_in}).to(at::kFloat);
  if (x.size(0) < 2) throw InvalidArgument("standardise_projector_input: need at least 2 tokens");
  auto mu = x.mean(0);                    // [D_v]
  auto sigma = x.std(0).clamp_min(1e-6);  // [D_v]
  at::NoGradGuard no_grad;
  auto w = lin->weight.to(at::kFloat) / sigma;  // [D, D_v] · diag(1/σ)
  auto b = lin->bias.to(at::kFloat) - w.matmul(mu);
  lin->weight.copy_(w);
  lin->bias.copy_(b);
}

}  // namespace vispco::train
