// What the CPU can do natively, read with CPUID and XGETBV (Intel SDM vol. 2A, "CPUID"; leaf 7 sub-leaf 0/1),
// for choosing the compute dtype: LibTorch's bf16 matmul is fast only with AVX512-BF16 or AMX-BF16
// (docs/benchmarks.md: ~2.6× fp32 there, ~30× slower than fp32 on AVX2-only CPUs).
#pragma once
#include <string>

namespace vispco {

/// Instruction-set features relevant to the compute dtype; each true only when the OS also enables the
/// register state it needs (XCR0).
struct CpuFeatures {
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;  ///< AVX512_BF16 (CPUID.(7,1):EAX[5])
  bool amx_bf16 = false;     ///< AMX-BF16 (CPUID.(7,0):EDX[22])
  /// Native bf16 compute: avx512_bf16 or amx_bf16.
  bool native_bf16() const { return avx512_bf16 || amx_bf16; }
  /// e.g. "avx2 avx512f avx512_bf16" ("none" when none).
  std::string summary() const;
};

/// This machine's features (all false on non-x86 builds).
CpuFeatures detect_cpu_features();

}  // namespace vispco
