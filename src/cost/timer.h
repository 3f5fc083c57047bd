// Wall-clock timing and process memory readings used by every stats struct.
#pragma once
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>

namespace vispco {

/// Milliseconds since construction (steady clock). Call sync_device() before reading when timing GPU work.
class Stopwatch {
 public:
  Stopwatch() : t0_(std::chrono::steady_clock::now()) {}
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  void reset() { t0_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point t0_;
};

/// Waits for queued work on `device` to finish (no-op on the CPU), so wall-clock timings are true.
void sync_device(const c10::Device& device);

/// Peak resident set size of this process so far, bytes (getrusage ru_maxrss).
int64_t peak_rss_bytes();
/// Current resident set size, bytes (/proc/self/statm); 0 where unavailable.
int64_t current_rss_bytes();

}  // namespace vispco
