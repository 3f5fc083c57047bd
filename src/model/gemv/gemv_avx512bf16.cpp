// gemv's AVX512_BF16 loop (kernels.h): bf16 weights × bf16 inputs by VDPBF16PS, 32 products per instruction
// summed pairwise into 16 fp32 lanes (Intel SDM vol. 2, "VDPBF16PS": the bf16 × bf16 products are exact in
// fp32; denormal inputs and results are flushed to zero). Compiled with -mavx512f -mavx512bf16.
// GCC 12's AVX-512 intrinsics pass an intentionally undefined register (_mm512_undefined_*) to their masked
// builtins, which draws a false -Wuninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "model/gemv/kernels.h"

namespace vispco::gemv_detail {
namespace {

inline float widen(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}
// The sum of the 16 lanes, as a tree of depth 4 (once per output row: the store costs nothing measurable).
inline float hsum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  for (int n = 8; n > 0; n /= 2)
    for (int i = 0; i < n; ++i) t[i] += t[i + n];
  return t[0];
}
inline __m512bh load32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

template <int R, int NW>
inline void block(const uint16_t* w, const uint16_t* x, const float* bias, float* y, int64_t in, int64_t o,
                  int64_t o0, int64_t ldy) {
  __m512 acc[NW][R];
  const uint16_t* wr[NW];
  for (int k = 0; k < NW; ++k) {
    wr[k] = w + (o + k) * in;
    for (int r = 0; r < R; ++r) acc[k][r] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 32 <= in; i += 32) {
    __m512bh xv[R];
    for (int r = 0; r < R; ++r) xv[r] = load32(x + r * in + i);
    for (int k = 0; k < NW; ++k) {
      // The same line of the next block's row (prefetch_next_rows, kernels.h); a hint, never a fault.
      _mm_prefetch(reinterpret_cast<const char*>(wr[k] + NW * in + i), _MM_HINT_T0);
      const __m512bh wv = load32(wr[k] + i);
      for (int r = 0; r < R; ++r) acc[k][r] = _mm512_dpbf16_ps(acc[k][r], wv, xv[r]);
    }
  }
  for (int k = 0; k < NW; ++k)
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc[k][r]);
      for (int64_t j = i; j < in; ++j) s += widen(wr[k][j]) * widen(x[r * in + j]);
      y[r * ldy + (o - o0) + k] = bias != nullptr ? s + bias[o + k] : s;
    }
}

template <int R>
void run(const uint16_t* w, const uint16_t* x, const float* bias, float* y, int64_t in, int64_t o0,
         int64_t o1, int64_t ldy) {
  int64_t o = o0;
  for (; o + 4 <= o1; o += 4) block<R, 4>(w, x, bias, y, in, o, o0, ldy);
  for (; o < o1; ++o) block<R, 1>(w, x, bias, y, in, o, o0, ldy);
}

}  // namespace

void gemv_bf16_avx512bf16(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                          int64_t o0, int64_t o1, int64_t ldy) {
  const auto* wp = static_cast<const uint16_t*>(w);
  const auto* xp = static_cast<const uint16_t*>(x);
  switch (rows) {
    case 1:
      run<1>(wp, xp, bias, y, in, o0, o1, ldy);
      break;
    case 2:
      run<2>(wp, xp, bias, y, in, o0, o1, ldy);
      break;
    case 3:
      run<3>(wp, xp, bias, y, in, o0, o1, ldy);
      break;
    default:
      run<4>(wp, xp, bias, y, in, o0, o1, ldy);
      break;
  }
}

}  // namespace vispco::gemv_detail
