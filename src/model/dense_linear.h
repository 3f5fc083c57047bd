// The decoder's float linear layer, y = x Wᵀ + b, with paths for the few rows of a decode step.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vispco {

/// Most rows for which dense_linear computes a bf16 product as (W xᵀ)ᵀ: measured equal to at::linear at 128
/// rows and slower at 616 (2 threads, AMX-BF16 Xeon, the 1.1B decoder's shapes).
inline constexpr int64_t kDenseLinearFewRows = 64;

/// Least input width at which dense_linear moves a bf16 product off a slow AMX row count
/// (model/amx_row_blocks.h). The rule was measured at widths 1,280, 2,048 and 11,008 (Qwen2.5-VL's vision
/// tower and decoders); narrower products — the bundled 192-wide model's — keep at::linear as they were.
inline constexpr int64_t kDenseLinearPadMinWidth = 1024;

/// y = x Wᵀ + b, as torch.nn.functional.linear, with CPU paths for the few rows of a decode step, whose time
/// is the read of every weight (issues 20 and 51; bench/bench_decode_bandwidth, docs/benchmarks.md):
/// - 1..kGemvMaxRows rows (decode at batch ≤ 4), fp32 or bf16, contiguous weight, no gradient recorded
///   (autograd off, or no operand requiring grad): vispco's own gemv (model/gemv/gemv.h), one pass over the
///   weight with AVX-512 / AVX512_BF16 / AVX2 loops chosen at run time, summing in fp32;
/// - otherwise one row: at::addmv / at::mv, LibTorch's matrix–vector kernel — in bf16 only on CPUs with
///   AVX-512 (BW, VL, DQ): elsewhere LibTorch 1.13's bf16 matrix–vector kernel sums in bf16 (max error 1.25
///   against 0.12 for (W xᵀ)ᵀ at in = 300, AVX2 Xeon), so a bf16 row there takes the next path;
/// - up to kDenseLinearFewRows rows in bf16 (batched decode): (W xᵀ)ᵀ through at::mm, 21–23 GB/s where
///   at::linear's x Wᵀ reaches 8–15 GB/s at 2–64 rows (in fp32 both forms are alike, so fp32 keeps
///   at::linear).
/// - more than kDenseLinearFewRows rows in bf16, in ≥ kDenseLinearPadMinWidth, no gradient recorded, on an
///   AMX CPU with LibTorch 1.13, at a row count amx_slow_row_count flags at the intra-op thread count
///   (oneDNN's AMX matmul 2–5× slower there; docs/benchmarks.md, "the bf16 row-count cliff"): at::linear on x
///   copied into amx_fast_row_count(rows, at::get_num_threads()) rows (1–8 more, zero), the extra outputs
///   dropped (linear_with_padded_rows).
/// Everything else calls at::linear. Results agree with at::linear to
/// rounding (another summation order), not bit for bit.
/// @param x [..., in] @param weight [out, in], x's dtype @param bias [out] or undefined
/// @return [..., out] in x's dtype, contiguous. @throws c10::Error on mismatched shapes or dtypes (as
/// at::linear).
at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

/// x Wᵀ + b computed on x copied into a buffer of `padded_rows` rows whose extra rows are zero, the extra
/// output rows dropped: what dense_linear runs for a row count oneDNN's AMX matmul blocks badly. Each row's
/// result is at::linear's for that row up to the kernel's rounding (bf16: last-bit differences between row
/// counts).
/// @param x [..., in], any strides @param weight [out, in], x's dtype @param bias [out] or undefined
/// @param padded_rows ≥ x's rows (x.numel() / in)
/// @return [..., out] in x's dtype, contiguous: a row slice of the [padded_rows, out] result (its storage
/// holds the extra rows too). @throws c10::Error when padded_rows < rows, on a 0-d or empty-width x, or on
/// mismatched shapes or dtypes (as at::linear).
at::Tensor linear_with_padded_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                   int64_t padded_rows);

/// The row count at which dense_linear(x, weight, bias) computes x Wᵀ: amx_fast_row_count(rows, threads)
/// where it moves a slow AMX row count (above), else x's rows (x.numel() / x.size(-1)); 0 for a 0-d x or a
/// width of 0. For benchmarks and tests. @param x [..., in] @param weight [out, in] @param bias [out] or
/// undefined
int64_t dense_linear_row_count(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace vispco
