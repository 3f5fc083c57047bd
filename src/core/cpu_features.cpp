// CPUID / XGETBV feature detection (see cpu_features.h).
#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdint>

namespace vispco {

std::string CpuFeatures::summary() const {
  std::string s;
  for (const auto& [on, name] : {std::pair{avx2, "avx2"}, std::pair{avx_vnni, "avx_vnni"},
                                 std::pair{avx512f, "avx512f"}, std::pair{avx512_vnni, "avx512_vnni"},
                                 std::pair{avx512_bf16, "avx512_bf16"}, std::pair{amx_bf16, "amx_bf16"}})
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "none" : s;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7 || !__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
  const bool zmm = ymm && (xcr0 & 0xE0) == 0xE0;   // opmask + ZMM state
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // AMX TILECFG + TILEDATA
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned max_sub = a;
  f.avx2 = ymm && ((b >> 5) & 1);
  f.avx512f = zmm && ((b >> 16) & 1);
  f.amx_bf16 = tiles && ((d >> 22) & 1);
  f.avx512_vnni = f.avx512f && ((c >> 11) & 1);
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512_bf16 = f.avx512f && ((a >> 5) & 1);
    f.avx_vnni = ymm && ((a >> 4) & 1);
  }
#endif
  return f;
}

}  // namespace vispco
