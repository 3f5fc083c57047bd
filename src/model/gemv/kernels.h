// The per-ISA inner loops of gemv (gemv.h), one .cpp per instruction set, each compiled with its own -m flags
// (CMakeLists.txt) and free of ATen and standard-library inline code, so that no AVX instruction leaks into
// code the rest of the build shares.
#pragma once
#include <cstdint>

namespace vispco::gemv_detail {

/// For o in [o0, o1) and r in [0, rows): y[r * ldy + (o - o0)] = Σ_i x[r · in + i] · w[o · in + i] + b[o]
/// (b = 0 when bias is null), summed in fp32. w: [out, in] row-major, fp32 (float) or bf16 (uint16_t bits);
/// x: rows × in, fp32, except for gemv_bf16_avx512bf16 where it is bf16 like w; bias: fp32 [out] or null.
/// rows in 1..4.
using Kernel = void (*)(const void* w, const void* x, const float* bias, float* y, int64_t in, int rows,
                        int64_t o0, int64_t o1, int64_t ldy);

void gemv_f32_scalar(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t, int64_t);
void gemv_bf16_scalar(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t,
                      int64_t);
void gemv_f32_avx2(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t, int64_t);
void gemv_bf16_avx2(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t, int64_t);
void gemv_f32_avx512(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t, int64_t);
void gemv_bf16_avx512(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t,
                      int64_t);
void gemv_bf16_avx512bf16(const void*, const void*, const float*, float*, int64_t, int, int64_t, int64_t,
                          int64_t);

}  // namespace vispco::gemv_detail
