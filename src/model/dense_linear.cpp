// The decoder's float linear layer with its one-row (matrix–vector) path; see dense_linear.h.
#include "model/dense_linear.h"

#include <ATen/ATen.h>

namespace vispco {

at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool one_row = x.dim() >= 1 && x.numel() == x.size(-1) && weight.dim() == 2;
  if (!one_row || !x.device().is_cpu()) return at::linear(x, weight, bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  const auto v = x.reshape({x.size(-1)});
  auto y = bias.defined() ? at::addmv(bias, weight, v) : at::mv(weight, v);
  return y.view(sizes);
}

}  // namespace vispco
