// `--dtype auto` on the CPU by measurement (issue 51): time a decoder-sized prefill product and one-row
// decode products in fp32 and bf16 through the decoder's own paths (dense_linear), choose the dtype whose
// modelled request is faster, and keep the result per CPU model and thread count in a small JSON cache.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/context.h"

namespace vispco {

/// The request the choice models: a prefill of this many positions (LLaVA-1.5: 576 visual + 40 text) and
/// this many decoded tokens.
inline constexpr int64_t kCalibrationRequestPositions = 616;
inline constexpr int64_t kCalibrationRequestTokens = 32;

/// One dtype's times for one [D, D] decoder weight (D = kCalibrationWidth), milliseconds, best of repeats.
struct DtypeTiming {
  double prefill_ms = 0;  ///< x [kCalibrationPrefillRows, D] · Wᵀ (dense_linear → at::linear)
  double decode_ms = 0;   ///< x [1, D] · Wᵀ with W read from memory, not cache (dense_linear → gemv)
};
inline constexpr int64_t kCalibrationWidth = 2048;       ///< D (TinyLlama-1.1B's hidden size)
inline constexpr int64_t kCalibrationPrefillRows = 128;  ///< rows of the timed prefill product

/// A calibration: both dtypes' timings and what they were measured on.
struct DtypeCalibration {
  DtypeTiming fp32, bf16;
  std::string cpu;        ///< the CPU's model name (/proc/cpuinfo), part of the cache key
  int n_threads = 0;      ///< at::get_num_threads() during the measurement, part of the cache key
  std::string gemv_path;  ///< gemv_isa_name(gemv_best_isa()), part of the cache key
};

/// The modelled request time of one dtype per decoder weight, ms: prefill_ms scaled from
/// kCalibrationPrefillRows to kCalibrationRequestPositions rows, plus kCalibrationRequestTokens × decode_ms.
double modelled_request_ms(const DtypeTiming& t);

/// The dtype with the smaller modelled_request_ms (fp32 on a tie or a non-positive / non-finite time), with
/// a reason that gives the four timings, the two request times and `source` (e.g. "measured", "cached in
/// FILE"). Pure: no measuring.
DtypeChoice choose_dtype_by_calibration(const DtypeCalibration& c, const std::string& source);

/// Measures a calibration on this machine with the thread count in force: ~0.5 s on the AMX Xeon of
/// docs/benchmarks.md; where LibTorch's bf16 GEMM is slow (AVX2-only CPUs, ~30× fp32) the bf16 prefill is
/// timed once, not repeated, when its warm-up already takes 4× fp32's. Allocates ≤ 128 MiB of weights (8 fp32
/// 2048² matrices) for the time it runs.
DtypeCalibration measure_dtype_calibration();

/// The CPU's model name from /proc/cpuinfo ("model name"), or "unknown-cpu".
std::string cpu_model_name();

/// The "auto" CPU dtype: the calibration cached in `cache_file` for this CPU model, thread count and gemv
/// path, or else `measure()` stored there (the file's other entries kept). An empty `cache_file` measures
/// every time; an unreadable, malformed or unwritable file is measured past and named in the reason, never
/// an error. @param measure the measurement (tests inject fixed timings).
DtypeChoice calibrated_cpu_dtype(
    const std::string& cache_file,
    const std::function<DtypeCalibration()>& measure = measure_dtype_calibration);

}  // namespace vispco
