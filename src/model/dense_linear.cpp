// The decoder's float linear layer with its few-row paths; see dense_linear.h.
#include "model/dense_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "model/gemv/gemv.h"

namespace vispco {
namespace {

// Whether LibTorch 1.13 can send a bf16 matrix–vector product to oneDNN, which sums in fp32: only on CPUs
// with AVX-512 BW, VL and DQ (its mkldnn_bf16_device_check). Elsewhere its fallback kernel sums in bf16
// (tests/model/test_dense_linear.cpp sees it).
bool bf16_mv_sums_in_fp32() {
  static const bool yes = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq");
  return yes;
}

// Whether autograd would record this product (gemv records nothing).
bool needs_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::GradMode::is_enabled() &&
         (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
}

}  // namespace

at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.device().is_cpu() || x.dim() < 1 || weight.dim() != 2 || x.size(-1) == 0)
    return at::linear(x, weight, bias);
  if (gemv_accepts(x, weight, bias) && !needs_grad(x, weight, bias)) return gemv(x, weight, bias);
  const int64_t in = x.size(-1), rows = x.numel() / in;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  const bool one_row = rows == 1 && (!bf16 || bf16_mv_sums_in_fp32());
  const bool few_bf16_rows = !one_row && rows <= kDenseLinearFewRows && bf16;
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
