// Shadow monitoring of retention (issue 49): a seeded random share of the pruned, greedy requests is run a
// second time unpruned, as background work the scheduler starts only when no real request waits
// (BatchScheduler::submit_background), and the two answers are compared by exact text match. Per plan the
// monitor keeps samples and agreements and the Wilson score lower bound of the agreement rate (Wilson 1927;
// the lower end of the two-sided interval at z, e.g. 1.96 → 95 % two-sided, 97.5 % one-sided), mirrored to
// /metrics. The shadow answer arrives after the client's reply: it is recorded, never returned.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace vispco::serve {

/// Lower end of the Wilson score interval for k successes in n trials at normal quantile z:
/// (p̂ + z²/2n − z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n), p̂ = k/n; 0 when n = 0.
/// @throws InvalidArgument for k > n or z ≤ 0.
double wilson_lower(uint64_t k, uint64_t n, double z);

/// Upper end of the same interval: (p̂ + z²/2n + z·√(…)) / (1 + z²/n); 1 when n = 0. Same errors.
double wilson_upper(uint64_t k, uint64_t n, double z);

/// Shadow settings (plain value; validate() names the bad field).
struct ShadowOptions {
  double rate = 0;    ///< share of pruned greedy requests also run unpruned, in [0, 1]; 0 = off
  uint64_t seed = 0;  ///< seed of the draw (the same request order draws the same requests)
  double z = 1.96;    ///< normal quantile of the Wilson bound (1.96: two-sided 95 %), > 0
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

/// Per-plan agreement counts (thread-safe).
class ShadowMonitor {
 public:
  /// @param metrics where the counts go (declared by declare_server_metrics; may be null)
  ShadowMonitor(ShadowOptions opts, Metrics* metrics);
  /// Whether this request is shadowed: a Bernoulli(rate) draw from the seeded generator, made only for
  /// requests that are pruned (plan ≠ "none") and greedy (temperature 0); false otherwise without a draw.
  bool draw(const std::string& plan, double temperature);
  /// Records one comparison of `plan`'s answer with the unpruned one.
  void record(const std::string& plan, bool agreed);
  /// A shadow run that could not be queued (the background queue was full) or failed.
  void lost(const std::string& plan);
  struct Counts {
    uint64_t samples = 0, agreements = 0;
  };
  Counts counts(const std::string& plan) const;
  /// wilson_lower(agreements, samples, z) of the plan.
  double lower_bound(const std::string& plan) const;
  /// wilson_upper(agreements, samples, z) of the plan.
  double upper_bound(const std::string& plan) const;
  const ShadowOptions& options() const { return opts_; }

  /// A background job that runs `pruned` unpruned and records the comparison with `pruned_text` under
  /// `plan`. The request (pixels, prompt, decoding settings, stop sequences) is the pruned job's.
  GenerationJob shadow_job(const GenerationJob& pruned, const std::string& plan,
                           const std::string& pruned_text);

 private:
  ShadowOptions opts_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::map<std::string, Counts> counts_;
};

}  // namespace vispco::serve
