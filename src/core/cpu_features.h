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
  bool avx512_vnni = false;  ///< AVX512_VNNI (CPUID.(7,0):ECX[11]): u8·s8 dot products without saturation
  bool avx_vnni = false;     ///< AVX-VNNI (CPUID.(7,1):EAX[4]), the VEX form of the same
  /// An int8 dot-product instruction (VNNI). Without it x86 int8 GEMMs pair u8·s8 products into saturating
  /// 16-bit sums (vpmaddubsw), so 8-bit activations overflow; LibTorch's kernels then need 7-bit activations.
  bool int8_dot() const { return avx512_vnni || avx_vnni; }
  /// Native bf16 compute: avx512_bf16 or amx_bf16.
  bool native_bf16() const { return avx512_bf16 || amx_bf16; }
  /// e.g. "avx2 avx512f avx512_vnni avx512_bf16" ("none" when none).
  std::string summary() const;
};

/// This machine's features (all false on non-x86 builds).
CpuFeatures detect_cpu_features();

}  // namespace vispco
