// gemv's AVX2 + FMA loops (kernels.h): 8 fp32 lanes, fp32 weights by FMA, bf16 weights widened to fp32 by a
// 16-bit shift (exact). Compiled with -mavx2 -mfma (CMakeLists.txt); called only where the CPU has them.
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
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// NW output rows starting at o, for R input rows (R × NW accumulators of the 16 ymm registers).
template <int R, int NW, typename W>
inline void block(const W* w, const float* x, const float* bias, float* y, int64_t in, int64_t o, int64_t o0,
                  int64_t ldy) {
  __m256 acc[NW][R];
  const W* wr[NW];
  for (int k = 0; k < NW; ++k) {
    wr[k] = w + (o + k) * in;
    for (int r = 0; r < R; ++r) acc[k][r] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= in; i += 8) {
    __m256 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * in + i);
    for (int k = 0; k < NW; ++k) {
      const __m256 wv = load8(wr[k] + i);
      for (int r = 0; r < R; ++r) acc[k][r] = _mm256_fmadd_ps(wv, xv[r], acc[k][r]);
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
  constexpr int kNw = R <= 2 ? 4 : 2;
  int64_t o = o0;
  for (; o + kNw <= o1; o += kNw) block<R, kNw>(w, x, bias, y, in, o, o0, ldy);
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

void gemv_f32_avx2(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                   int64_t o0, int64_t o1, int64_t ldy) {
  by_rows<float>(w, x, bias, y, in, rows, o0, o1, ldy);
}

void gemv_bf16_avx2(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                    int64_t o0, int64_t o1, int64_t ldy) {
  by_rows<uint16_t>(w, x, bias, y, in, rows, o0, o1, ldy);
}

}  // namespace vispco::gemv_detail
