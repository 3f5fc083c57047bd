// The decoder's float linear layer with its few-row paths; see dense_linear.h.
#include "model/dense_linear.h"

#include <ATen/ATen.h>

namespace vispco {

at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.device().is_cpu() || x.dim() < 1 || weight.dim() != 2 || x.size(-1) == 0)
    return at::linear(x, weight, bias);
  const int64_t in = x.size(-1), rows = x.numel() / in;
  const bool one_row = rows == 1;
  const bool few_bf16_rows = rows >= 2 && rows <= kDenseLinearFewRows && x.scalar_type() == at::kBFloat16;
  if (!one_row && !few_bf16_rows) return at::linear(x, weight, bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  at::Tensor y;
  if (one_row) {
    const auto v = x.reshape({in});
    y = bias.defined() ? at::addmv(bias, weight, v) : at::mv(weight, v);
  } else {
    const auto xt = x.reshape({rows, in}).t();  // (W xᵀ + b 1ᵀ)ᵀ = x Wᵀ + b
    y = (bias.defined() ? at::addmm(bias.unsqueeze(1), weight, xt) : at::mm(weight, xt)).t().contiguous();
  }
  return y.view(sizes);
}

}  // namespace vispco
