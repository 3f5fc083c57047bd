// gemv's portable loops (kernels.h): one fp32 sum per output, in index order; bf16 widened by a 16-bit shift.
// The fallback for CPUs without AVX2 + FMA, and the plain reference the vector paths are read against.
#include <cstring>

#include "model/gemv/kernels.h"

namespace vispco::gemv_detail {
namespace {

inline float widen(float v) { return v; }
inline float widen(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename W>
void run(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows, int64_t o0,
         int64_t o1, int64_t ldy) {
  const auto* wp = static_cast<const W*>(w);
  const auto* xp = static_cast<const float*>(x);
  for (int64_t o = o0; o < o1; ++o)
    for (int r = 0; r < rows; ++r) {
      float s = 0;
      for (int64_t i = 0; i < in; ++i) s += widen(wp[o * in + i]) * xp[r * in + i];
      y[r * ldy + (o - o0)] = bias != nullptr ? s + bias[o] : s;
    }
}

}  // namespace

void gemv_f32_scalar(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                     int64_t o0, int64_t o1, int64_t ldy) {
  run<float>(w, x, bias, y, in, rows, o0, o1, ldy);
}

void gemv_bf16_scalar(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                      int64_t o0, int64_t o1, int64_t ldy) {
  run<uint16_t>(w, x, bias, y, in, rows, o0, o1, ldy);
}

}  // namespace vispco::gemv_detail
