// A matrix–vector product of vispco's own for the decode step (issue 51): y = x Wᵀ + b for 1–4 rows of x,
// streaming each weight once with wide loads, so that decode runs at the machine's memory-read bandwidth.
// LibTorch 1.13's one-row paths read weights at 1.6–20 GB/s where memory delivers 25–57 (docs/benchmarks.md).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vispco {

/// Most rows of x one gemv call takes (a decode step of up to 4 sequences).
inline constexpr int64_t kGemvMaxRows = 4;

/// The instruction-set paths of gemv, slowest first. Each exists on every build; a path runs only where the
/// CPU (and the OS's saved register state) supports it: gemv_isa_supported.
enum class GemvIsa {
  kScalar,      ///< plain C++, fp32 accumulation (any CPU)
  kAvx2,        ///< AVX2 + FMA, 8 fp32 lanes; bf16 weights widened to fp32 by a 16-bit shift
  kAvx512,      ///< AVX-512F, 16 fp32 lanes; bf16 weights widened by a shift
  kAvx512Bf16,  ///< as kAvx512 for fp32 weights; bf16 weights × bf16 inputs by VDPBF16PS (AVX512_BF16)
};

/// "scalar", "avx2", "avx512", "avx512_bf16".
const char* gemv_isa_name(GemvIsa isa);

/// Whether this CPU runs `isa` (core/cpu_features.h; kAvx2 also needs FMA).
bool gemv_isa_supported(GemvIsa isa);

/// The fastest path this CPU supports (computed once).
GemvIsa gemv_best_isa();

/// Whether gemv takes these operands: CPU tensors, x [..., in] with 1..kGemvMaxRows rows (numel / in),
/// in ≥ 1, weight [out, in] contiguous, bias [out] contiguous or undefined, all of one dtype, fp32 or bf16.
bool gemv_accepts(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

/// y = x Wᵀ + b (torch.nn.functional.linear) by one pass over W, split over at::parallel_for's threads in
/// blocks of output rows (so it follows --threads). Sums in fp32 whatever the dtype: fp32 weights by FMA;
/// bf16 weights either widened to fp32 (exact) or, on kAvx512Bf16, by VDPBF16PS, whose bf16 × bf16 products
/// are exact in fp32 (it flushes denormal inputs and sums to zero). The result is rounded once to x's dtype
/// (round to nearest even). Agrees with at::linear to rounding (another summation order), not bit for bit.
/// No autograd: call it only where no gradient is needed.
/// @param x [..., in] fp32 or bf16, at most kGemvMaxRows rows @param weight [out, in], x's dtype, contiguous
/// @param bias [out], x's dtype, or undefined @param isa a path gemv_isa_supported() (default: the best)
/// @return [..., out] in x's dtype, contiguous
/// @throws c10::Error when !gemv_accepts(x, weight, bias) or the path is not supported by this CPU.
at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});
at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, GemvIsa isa);

}  // namespace vispco
