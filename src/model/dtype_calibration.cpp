// `--dtype auto` by measurement and its cache (see dtype_calibration.h).
#include "model/dtype_calibration.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/dense_linear.h"
#include "model/gemv/gemv.h"

namespace vispco {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Weights for the decode timing: enough [D, D] matrices that one pass (≥ 64 MiB in bf16) cannot be served
// from the last-level cache, so the one-row products read memory as a decode step does.
constexpr int kDecodeMatrices = 8;
constexpr int kRepeats = 3;

DtypeTiming time_dtype(c10::ScalarType dtype, double stop_prefill_after_ms) {
  c10::InferenceMode guard;
  const int64_t d = kCalibrationWidth;
  std::vector<at::Tensor> weights;
  for (int k = 0; k < kDecodeMatrices; ++k) weights.push_back(at::full({d, d}, 0.01 * (k + 1), dtype));
  const auto x1 = at::full({1, d}, 0.5, dtype), xp = at::full({kCalibrationPrefillRows, d}, 0.5, dtype);
  DtypeTiming t;
  // Prefill: one warm-up, then the best of kRepeats; a warm-up already past `stop_prefill_after_ms` is
  // taken as the time (a bf16 GEMM 30× slower than fp32 needs no more evidence).
  auto t0 = Clock::now();
  at::Tensor sink = dense_linear(xp, weights[0]);
  t.prefill_ms = ms_since(t0);
  if (t.prefill_ms <= stop_prefill_after_ms) {
    t.prefill_ms = INFINITY;
    for (int r = 0; r < kRepeats; ++r) {
      t0 = Clock::now();
      sink = dense_linear(xp, weights[0]);
      t.prefill_ms = std::min(t.prefill_ms, ms_since(t0));
    }
  }
  // Decode: passes over all matrices, one row each; the best pass after a warm-up, per matrix.
  t.decode_ms = INFINITY;
  for (int r = 0; r <= kRepeats; ++r) {
    t0 = Clock::now();
    for (const auto& w : weights) sink = dense_linear(x1, w);
    if (r > 0) t.decode_ms = std::min(t.decode_ms, ms_since(t0) / kDecodeMatrices);
  }
  return t;
}

std::string cache_key(const DtypeCalibration& c) {
  return c.cpu + " | threads " + std::to_string(c.n_threads) + " | gemv " + c.gemv_path;
}

nlohmann::json to_json(const DtypeTiming& t) {
  return {{"prefill_ms", t.prefill_ms}, {"decode_ms", t.decode_ms}};
}
DtypeTiming timing_from(const nlohmann::json& j) {
  return {j.at("prefill_ms").get<double>(), j.at("decode_ms").get<double>()};
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

double modelled_request_ms(const DtypeTiming& t) {
  return t.prefill_ms * static_cast<double>(kCalibrationRequestPositions) / kCalibrationPrefillRows +
         static_cast<double>(kCalibrationRequestTokens) * t.decode_ms;
}

DtypeChoice choose_dtype_by_calibration(const DtypeCalibration& c, const std::string& source) {
  const double f = modelled_request_ms(c.fp32), b = modelled_request_ms(c.bf16);
  const bool valid = std::isfinite(b) && b > 0 && c.bf16.prefill_ms > 0 && c.bf16.decode_ms > 0;
  const bool bf16 = valid && std::isfinite(f) && b < f;
  std::string why = "auto: " + source + " (" + c.cpu + ", " + std::to_string(c.n_threads) +
                    " threads), per 2048² decoder weight: prefill " +
                    std::to_string(kCalibrationPrefillRows) + " rows fp32 " + fmt(c.fp32.prefill_ms) +
                    " / bf16 " + fmt(c.bf16.prefill_ms) + " ms, decode row fp32 " + fmt(c.fp32.decode_ms) +
                    " / bf16 " + fmt(c.bf16.decode_ms) + " ms (gemv " + c.gemv_path + "); a " +
                    std::to_string(kCalibrationRequestPositions) + "-position prefill + " +
                    std::to_string(kCalibrationRequestTokens) + " tokens: fp32 " + fmt(f) + " / bf16 " +
                    fmt(b) + " ms → " + (bf16 ? "bf16" : "fp32") + " is faster";
  if (!valid) why += " (bf16 timing unusable)";
  return {bf16 ? c10::kBFloat16 : c10::kFloat, why};
}

DtypeCalibration measure_dtype_calibration() {
  DtypeCalibration c;
  c.cpu = cpu_model_name();
  c.n_threads = at::get_num_threads();
  c.gemv_path = gemv_isa_name(gemv_best_isa());
  c.fp32 = time_dtype(c10::kFloat, INFINITY);
  c.bf16 = time_dtype(c10::kBFloat16, 4 * c.fp32.prefill_ms);
  return c;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "unknown-cpu" : line.substr(start);
    }
  return "unknown-cpu";
}

DtypeChoice calibrated_cpu_dtype(const std::string& cache_file,
                                 const std::function<DtypeCalibration()>& measure) {
  DtypeCalibration key;
  key.cpu = cpu_model_name();
  key.n_threads = at::get_num_threads();
  key.gemv_path = gemv_isa_name(gemv_best_isa());
  const std::string k = cache_key(key);
  nlohmann::json cache = nlohmann::json::object();
  std::string note;
  if (!cache_file.empty() && std::filesystem::exists(cache_file)) {
    try {
      std::ifstream in(cache_file);
      cache = nlohmann::json::parse(in);
      if (!cache.is_object()) throw std::runtime_error("not an object");
      if (cache.contains(k)) {
        DtypeCalibration c = key;
        c.fp32 = timing_from(cache.at(k).at("fp32"));
        c.bf16 = timing_from(cache.at(k).at("bf16"));
        return choose_dtype_by_calibration(c, "cached in " + cache_file);
      }
    } catch (const std::exception& e) {
      note = "; the cache " + cache_file + " was unreadable (" + std::string(e.what()).substr(0, 80) + ")";
      cache = nlohmann::json::object();
    }
  }
  const DtypeCalibration c = measure();
  std::string source = "measured";
  if (!cache_file.empty()) {
    try {
      cache[cache_key(c)] = {{"fp32", to_json(c.fp32)}, {"bf16", to_json(c.bf16)}};
      const std::filesystem::path path(cache_file);
      if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
      // A file of this process's own, renamed over the cache: concurrent runs never see half a file.
      const std::string tmp = cache_file + "." + std::to_string(getpid()) + ".tmp";
      {
        std::ofstream out(tmp);
        out << cache.dump(2) << "\n";
        if (!out) throw std::runtime_error("cannot write " + tmp);
      }
      std::filesystem::rename(tmp, cache_file);
      source = "measured, cached in " + cache_file;
    } catch (const std::exception& e) {
      note += "; not cached (" + std::string(e.what()).substr(0, 80) + ")";
    }
  }
  DtypeChoice choice = choose_dtype_by_calibration(c, source);
  choice.reason += note;
  return choice;
}

}  // namespace vispco
