// gemv's AVX-512F loops (kernels.h): 16 fp32 lanes, fp32 weights by FMA, bf16 weights widened to fp32 by a
// 16-bit shift (exact). Compiled with -mavx512f -mfma (CMakeLists.txt); called only where the CPU has them.
// GCC 12's AVX-512 intrinsics pass an intentionally undefined register (_mm512_undefined_*) to their masked
// builtins, which draws a false -Wuninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "model/gemv/kernels.h"

namespace vispco::gemv_detail {
namespace {

inline float widen(float v) { return v; }
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
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// NW output rows starting at o, for R input rows: NW streams of W, R × NW accumulators.
template <int R, int NW, typename W>
inline void block(const W* w, const float* x, const float* bias, float* y, int64_t in, int64_t o, int64_t o0,
                  int64_t ldy) {
  __m512 acc[NW][R];
  const W* wr[NW];
  for (int k = 0; k < NW; ++k) {
    wr[k] = w + (o + k) * in;
    for (int r = 0; r < R; ++r) acc[k][r] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 16 <= in; i += 16) {
    __m512 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + r * in + i);
    for (int k = 0; k < NW; ++k) {
      const __m512 wv = load16(wr[k] + i);
      for (int r = 0; r < R; ++r) acc[k][r] = _mm512_fmadd_ps(wv, xv[r], acc[k][r]);
    }
  }
  for (int k = 0; k < NW; ++k)
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc[k][r]);
      for (int64_t j = i; j < in; ++j) s += widen(wr[k][j]) * x[r * in + j];
      y[r * ldy + (o - o0) + k] = bias != nullptr ? s + bias[o + k] : s;
    }
}

template <int R, typename W>
void run(const W* w, const float* x, const float* bias, float* y, int64_t in, int64_t o0, int64_t o1,
         int64_t ldy) {
  int64_t o = o0;
  for (; o + 4 <= o1; o += 4) block<R, 4>(w, x, bias, y, in, o, o0, ldy);
  for (; o < o1; ++o) block<R, 1>(w, x, bias, y, in, o, o0, ldy);
}

template <typename W>
void by_rows(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows, int64_t o0,
             int64_t o1, int64_t ldy) {
  const auto* wp = static_cast<const W*>(w);
  const auto* xp = static_cast<const float*>(x);
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

}  // namespace

void gemv_f32_avx512(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                     int64_t o0, int64_t o1, int64_t ldy) {
  by_rows<float>(w, x, bias, y, in, rows, o0, o1, ldy);
}

void gemv_bf16_avx512(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                      int64_t o0, int64_t o1, int64_t ldy) {
  by_rows<uint16_t>(w, x, bias, y, in, rows, o0, o1, ldy);
}

}  // namespace vispco::gemv_detail
