// Tests of dense_linear: its one-row (matrix–vector) path against y = x Wᵀ + b computed in double by
// broadcasting and summing, and its other shapes against at::linear.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include "core/cpu_features.h"
#include "model/amx_row_blocks.h"
#include "model/dense_linear.h"

namespace vispco {
namespace {

// Reference in double: y[..., o] = Σ_i x[..., i] W[o, i] + b[o].
at::Tensor reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  auto y = (x.to(at::kDouble).unsqueeze(-2) * w.to(at::kDouble)).sum(-1);
  return b.defined() ? y + b.to(at::kDouble) : y;
}

TEST(DenseLinear, OneRowMatchesTheDoubleReference) {
  at::manual_seed(3);
  const int64_t in = 300, out = 70;
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const auto w = at::randn({out, in}).to(dtype), b = at::randn({out}).to(dtype);
    for (const auto& shape : {std::vector<int64_t>{1, 1, in}, {1, in}, {in}}) {
      const auto x = at::randn(shape).to(dtype);
      for (bool with_bias : {false, true}) {
        const auto bias = with_bias ? b : at::Tensor();
        const auto y = dense_linear(x, w, bias);
        auto want_shape = shape;
        want_shape.back() = out;
        ASSERT_EQ(y.sizes(), at::IntArrayRef(want_shape));
        EXPECT_EQ(y.scalar_type(), dtype);
        // Per element: fp32 differs by summation order only; bf16 products are exact in the fp32
        // accumulator, so its error is the output's rounding to 8 mantissa bits (≤ 2^-9 relative).
        const auto ref = reference(x, w, bias);
        const double rel = dtype == at::kFloat ? 1e-6 : 1.0 / 256;
        const auto excess = (y.to(at::kDouble) - ref).abs() - (rel * ref.abs() + 1e-4);
        EXPECT_LE(excess.max().item<double>(), 0.0)
            << c10::toString(dtype) << " bias " << with_bias << " rank " << shape.size();
      }
    }
  }
}

TEST(DenseLinear, FewBf16RowsMatchTheDoubleReference) {
  at::manual_seed(5);
  const int64_t in = 300, out = 70;
  const auto w = at::randn({out, in}).to(at::kBFloat16), b = at::randn({out}).to(at::kBFloat16);
  for (int64_t rows : {int64_t{2}, int64_t{8}, kDenseLinearFewRows}) {
    const auto x = at::randn({rows, 1, in}).to(at::kBFloat16);
    for (bool with_bias : {false, true}) {
      const auto bias = with_bias ? b : at::Tensor();
      const auto y = dense_linear(x, w, bias);
      ASSERT_EQ(y.sizes(), at::IntArrayRef({rows, 1, out}));
      ASSERT_TRUE(y.is_contiguous());
      const auto ref = reference(x, w, bias);
      const auto excess = (y.to(at::kDouble) - ref).abs() - (ref.abs() / 256 + 1e-4);
      EXPECT_LE(excess.max().item<double>(), 0.0) << rows << " rows, bias " << with_bias;
    }
  }
}

TEST(DenseLinear, OtherShapesAreAtLinear) {
  at::manual_seed(4);
  const auto w = at::randn({40, 24}), b = at::randn({40}), x = at::randn({2, 3, 24});  // fp32, 6 rows
  EXPECT_TRUE(at::equal(dense_linear(x, w, b), at::linear(x, w, b)));
  EXPECT_TRUE(at::equal(dense_linear(x, w), at::linear(x, w)));
  const auto wb = w.to(at::kBFloat16), xb = at::randn({kDenseLinearFewRows + 1, 24}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(dense_linear(xb, wb), at::linear(xb, wb)));  // bf16 past the few-row limit
}

// 174 rows (= 3 · 58, a row count amx_slow_row_count flags) of width kDenseLinearPadMinWidth in bf16: on AMX
// CPUs the padded path (174 → 175 rows, cut back), elsewhere at::linear; either way each row must be its own
// x Wᵀ + b (fails if the copy, the zero rows or the cut put any row's result elsewhere).
TEST(DenseLinear, Bf16RowsAtASlowAmxRowCountMatchTheDoubleReference) {
  at::manual_seed(6);
  const int64_t in = kDenseLinearPadMinWidth, out = 96;
  const auto w = at::randn({out, in}).to(at::kBFloat16), b = at::randn({out}).to(at::kBFloat16);
  const auto x = at::randn({2, 87, in}).to(at::kBFloat16);
  ASSERT_TRUE(amx_slow_row_count(2 * 87, 1) && amx_slow_row_count(2 * 87, 2));
  // Moved to 175 rows (174 = 3 · 58 is flagged at every thread count) exactly where oneDNN's AMX matmul runs
  // it: bf16, this width, an AMX CPU, LibTorch 1.13, no autograd.
  const bool amx = detect_cpu_features().amx_bf16 && TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13;
  EXPECT_EQ(dense_linear_row_count(x, w), amx ? 175 : 174);
  EXPECT_EQ(dense_linear_row_count(x.to(at::kFloat), w.to(at::kFloat)), 174);
  EXPECT_EQ(dense_linear_row_count(x.narrow(-1, 0, 192), w.narrow(-1, 0, 192)), 174);
  {
    at::AutoGradMode grad_on(true);
    EXPECT_EQ(dense_linear_row_count(x, w.detach().requires_grad_(true)), 174);
  }
  for (bool with_bias : {false, true}) {
    const auto bias = with_bias ? b : at::Tensor();
    const auto y = dense_linear(x, w, bias);
    ASSERT_EQ(y.sizes(), at::IntArrayRef({2, 87, out}));
    EXPECT_TRUE(y.is_contiguous());
    // bf16 products are exact in oneDNN's fp32 accumulator; the output's rounding to bf16 is ≤ 2^-9
    // relative, plus fp32 summation over 1024 terms of |x w| ~ 1 (≤ 1e-3 absolute here).
    const auto ref = reference(x, w, bias);
    const auto excess = (y.to(at::kDouble) - ref).abs() - (ref.abs() / 256 + 1e-3);
    EXPECT_LE(excess.max().item<double>(), 0.0) << "bias " << with_bias;
  }
}

// The padded product itself, on every CPU: a non-contiguous 3-D x, with and without bias, fp32 (summation
// order only) and bf16 (output rounding), each row against the double reference.
TEST(DenseLinear, LinearWithPaddedRowsMatchesTheDoubleReference) {
  at::manual_seed(7);
  const int64_t in = 96, out = 40;
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const auto w = at::randn({out, in}).to(dtype), b = at::randn({out}).to(dtype);
    const auto x = at::randn({29, 2, in}).to(dtype).transpose(0, 1);  // [2, 29, in], not contiguous
    ASSERT_FALSE(x.is_contiguous());
    for (bool with_bias : {false, true}) {
      const auto bias = with_bias ? b : at::Tensor();
      const auto y = linear_with_padded_rows(x, w, bias, 64);
      ASSERT_EQ(y.sizes(), at::IntArrayRef({2, 29, out}));
      EXPECT_TRUE(y.is_contiguous());
      const auto ref = reference(x, w, bias);
      const double rel = dtype == at::kFloat ? 1e-6 : 1.0 / 256;
      const auto excess = (y.to(at::kDouble) - ref).abs() - (rel * ref.abs() + 1e-4);
      EXPECT_LE(excess.max().item<double>(), 0.0) << c10::toString(dtype) << " bias " << with_bias;
    }
  }
  EXPECT_THROW(linear_with_padded_rows(at::randn({10, 8}), at::randn({4, 8}), {}, 9), c10::Error);
}

}  // namespace
}  // namespace vispco
