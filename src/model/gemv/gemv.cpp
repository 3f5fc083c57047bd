// gemv's entry (gemv.h): operand checks, the choice of the per-ISA loop (kernels.h) and the split of the
// output rows over at::parallel_for's threads.
#include "model/gemv/gemv.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>

#include "core/cpu_features.h"
#include "model/gemv/kernels.h"

namespace vispco {
namespace {

using gemv_detail::Kernel;

// Output rows per unit of parallel work (one kernel call), and the least weight bytes a thread gets before
// the rows are split at all: below ~64 KiB OpenMP's fork and join (microseconds) cost more than the read.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kMinBytesPerThread = int64_t{64} << 10;

Kernel kernel_for(GemvIsa isa, bool bf16) {
  using namespace gemv_detail;
  switch (isa) {
#if defined(__x86_64__)
    case GemvIsa::kAvx2:
      return bf16 ? gemv_bf16_avx2 : gemv_f32_avx2;
    case GemvIsa::kAvx512:
      return bf16 ? gemv_bf16_avx512 : gemv_f32_avx512;
    case GemvIsa::kAvx512Bf16:
      return bf16 ? gemv_bf16_avx512bf16 : gemv_f32_avx512;
#endif
    default:
      return bf16 ? gemv_bf16_scalar : gemv_f32_scalar;
  }
}

}  // namespace

const char* gemv_isa_name(GemvIsa isa) {
  switch (isa) {
    case GemvIsa::kAvx2:
      return "avx2";
    case GemvIsa::kAvx512:
      return "avx512";
    case GemvIsa::kAvx512Bf16:
      return "avx512_bf16";
    default:
      return "scalar";
  }
}

bool gemv_isa_supported(GemvIsa isa) {
#if defined(__x86_64__)
  static const CpuFeatures f = detect_cpu_features();
  static const bool fma = __builtin_cpu_supports("fma");
  switch (isa) {
    case GemvIsa::kAvx2:
      return f.avx2 && fma;
    case GemvIsa::kAvx512:
      return f.avx512f && fma;
    case GemvIsa::kAvx512Bf16:
      return f.avx512f && f.avx512_bf16 && fma;
    default:
      return true;
  }
#else
  return isa == GemvIsa::kScalar;
#endif
}

GemvIsa gemv_best_isa() {
  static const GemvIsa best = [] {
    for (auto isa : {GemvIsa::kAvx512Bf16, GemvIsa::kAvx512, GemvIsa::kAvx2})
      if (gemv_isa_supported(isa)) return isa;
    return GemvIsa::kScalar;
  }();
  return best;
}

bool gemv_accepts(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !x.device().is_cpu() || !weight.device().is_cpu()) return false;
  const auto dtype = x.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kBFloat16) || weight.scalar_type() != dtype) return false;
  if (x.dim() < 1 || weight.dim() != 2 || !weight.is_contiguous()) return false;
  const int64_t in = x.size(-1), out = weight.size(0);
  if (in < 1 || out < 1 || weight.size(1) != in) return false;
  const int64_t rows = x.numel() / in;
  if (rows < 1 || rows > kGemvMaxRows) return false;
  if (!bias.defined()) return true;
  return bias.device().is_cpu() && bias.scalar_type() == dtype && bias.dim() == 1 && bias.size(0) == out;
}

at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return gemv(x, weight, bias, gemv_best_isa());
}

at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, GemvIsa isa) {
  TORCH_CHECK(
      gemv_accepts(x, weight, bias),
      "gemv: expected CPU x [..., in] with 1..4 rows, weight [out, in] contiguous, bias [out] or none, "
      "all fp32 or all bf16; got x ",
      x.sizes(), " ", x.scalar_type(), ", weight ", weight.sizes(), " ", weight.scalar_type());
  TORCH_CHECK(gemv_isa_supported(isa), "gemv: this CPU does not run the ", gemv_isa_name(isa), " path");
  const int64_t in = x.size(-1), out = weight.size(0), rows = x.numel() / in;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  // x as the loop reads it: bf16 for VDPBF16PS, else fp32 (rows × in values, a no-op for fp32 x).
  const bool x_bf16 = bf16 && isa == GemvIsa::kAvx512Bf16;
  const at::Tensor xk = x.reshape({rows, in}).to(x_bf16 ? at::kBFloat16 : at::kFloat).contiguous();
  const at::Tensor bk = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  at::Tensor y = at::empty(sizes, x.options().memory_format(at::MemoryFormat::Contiguous));

  const Kernel kernel = kernel_for(isa, bf16);
  const void* w = weight.data_ptr();
  const void* xp = xk.data_ptr();
  const float* b = bk.defined() ? bk.data_ptr<float>() : nullptr;
  const int n_rows = static_cast<int>(rows);
  const int64_t n_blocks = (out + kRowBlock - 1) / kRowBlock;
  const int64_t block_bytes = kRowBlock * in * static_cast<int64_t>(weight.element_size());
  const int64_t grain = std::max<int64_t>(1, kMinBytesPerThread / block_bytes);
  if (!bf16) {
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, n_blocks, grain, [&](int64_t b0, int64_t b1) {
      const int64_t o0 = b0 * kRowBlock, o1 = std::min(out, b1 * kRowBlock);
      kernel(w, xp, b, yp + o0, in, n_rows, o0, o1, out);
    });
    return y;
  }
  auto* yp = y.data_ptr<at::BFloat16>();
  at::parallel_for(0, n_blocks, grain, [&](int64_t b0, int64_t b1) {
    float acc[kGemvMaxRows * kRowBlock];  // one block's fp32 sums, then rounded once to bf16
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t o0 = blk * kRowBlock, o1 = std::min(out, o0 + kRowBlock);
      kernel(w, xp, b, acc, in, n_rows, o0, o1, kRowBlock);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = o0; o < o1; ++o) yp[r * out + o] = at::BFloat16(acc[r * kRowBlock + (o - o0)]);
    }
  });
  return y;
}

}  // namespace vispco
