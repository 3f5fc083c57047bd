// The float linear layer of the decoder, y = x Wᵀ + b, with a one-row path for decoding one sequence.
#pragma once
#include <ATen/core/Tensor.h>

namespace vispco {

/// y = x Wᵀ + b, as torch.nn.functional.linear. When x holds exactly one row on the CPU (decode at batch 1:
/// x [1, 1, in]), the product is at::addmv / at::mv, LibTorch's matrix–vector kernel, which streams the
/// weight at 20–25 GB/s where at::linear's one-row GEMM reaches 10–15 GB/s (2 threads, bf16 and fp32;
/// bench/bench_decode_bandwidth and docs/benchmarks.md, issue 20) — a decode step reads every weight once,
/// so its time is that read. Other shapes and devices call at::linear. Results agree with at::linear to
/// rounding (another summation order), not bit for bit.
/// @param x [..., in] @param weight [out, in], x's dtype @param bias [out] or undefined
/// @return [..., out] in x's dtype. @throws c10::Error on mismatched shapes or dtypes (as at::linear).
at::Tensor dense_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace vispco
