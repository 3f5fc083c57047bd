// The decoder's float linear layer with its few-row paths; see dense_linear.h.
#include "model/dense_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <torch/version.h>

#include "core/cpu_features.h"
#include "model/amx_row_blocks.h"
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

// Whether this product runs on LibTorch 1.13's oneDNN AMX matmul at a row count it blocks badly
// (amx_row_blocks.h): AMX CPU, bf16, past the few-row paths, at least kDenseLinearPadMinWidth wide, shapes
// that agree (a mismatch is left to at::linear's error), no autograd.
bool pad_to_fast_row_count(const at::Tensor& x, const at::Tensor& weight, int64_t rows, int64_t in,
                           bool grad) {
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
  static const bool amx = detect_cpu_features().amx_bf16;
  return amx && !grad && x.scalar_type() == at::kBFloat16 && rows > kDenseLinearFewRows &&
         in >= kDenseLinearPadMinWidth && weight.size(1) == in &&
         amx_slow_row_count(rows, at::get_num_threads());
#else
  (void)x, (void)weight, (void)rows, (void)in, (void)grad;
  return false;
#endif
}

}  // namespace

at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.device().is_cpu() || x.dim() < 1 || weight.dim() != 2 || x.size(-1) == 0)
    return at::linear(x, weight, bias);
  if (gemv_accepts(x, weight, bias) && !needs_grad(x, weight, bias)) return gemv(x, weight, bias);
  const int64_t in = x.size(-1), rows = x.numel() / in;
  if (pad_to_fast_row_count(x, weight, rows, in, needs_grad(x, weight, bias)))
    return linear_with_padded_rows(x, weight, bias, amx_fast_row_count(rows, at::get_num_threads()));
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

at::Tensor linear_with_padded_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                   int64_t padded_rows) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0,
              "linear_with_padded_rows: x must be [..., in] with in > 0, got ", x.sizes());
  const int64_t in = x.size(-1), rows = x.numel() / in;
  TORCH_CHECK(padded_rows >= rows, "linear_with_padded_rows: padded_rows ", padded_rows, " < x's ", rows,
              " rows");
  auto xp = at::empty({padded_rows, in}, x.options());
  xp.narrow(0, 0, rows).view(x.sizes()).copy_(x);  // one copy, whatever x's strides
  xp.narrow(0, rows, padded_rows - rows).zero_();
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  // A row slice of the contiguous [padded_rows, out] result is contiguous: no copy of the output.
  return at::linear(xp, weight, bias).narrow(0, 0, rows).view(sizes);
}

int64_t dense_linear_row_count(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() < 1 || x.size(-1) == 0) return 0;
  const int64_t in = x.size(-1), rows = x.numel() / in;
  return x.device().is_cpu() && weight.dim() == 2 &&
                 pad_to_fast_row_count(x, weight, rows, in, needs_grad(x, weight, bias))
             ? amx_fast_row_count(rows, at::get_num_threads())
             : rows;
}

}  // namespace vispco
