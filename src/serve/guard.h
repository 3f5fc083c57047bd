// Automatic fallback (issue 49): a plan whose shadow agreement (serve/shadow.h) shows that its loss exceeds
// ε is taken out of service. Rule: after at least min_samples shadow comparisons of plan P, if the Wilson
// upper bound of P's agreement rate is below 1 − ε — the loss (1 − agreement) is above ε at the bound's level
// (z = 1.96: one-sided 97.5 % per look; the test is repeated at every sample, so over a long run the chance
// of a false trip grows) — P trips. From then on every request the server would have run with P (its default
// plan, or a target's pick) runs the next safer plan: the cheapest frontier plan with a lower judged loss
// that has not tripped itself, or unpruned ("none") when P is not in the frontier or nothing safer is left. A
// trip is logged once and counted; it lasts for the process's lifetime (no switch back: a tripped plan gets
// no more traffic, hence no new evidence; restart the server to re-arm it). A plan a request names runs as
// named.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "serve/frontier.h"
#include "serve/metrics.h"
#include "serve/shadow.h"

namespace vispco::serve {

/// Guard settings (plain value; validate() names the bad field).
struct GuardOptions {
  double epsilon = 0;        ///< loss (1 − agreement) beyond which a plan trips, in (0, 1); 0 = guard off
  int64_t min_samples = 10;  ///< shadow samples before a plan may trip, ≥ 1
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

/// The guard (thread-safe).
class Guard {
 public:
  /// @param frontier the server's frontier (may be null) @param metrics may be null
  /// @param log called once per trip with a one-line message (may be empty)
  Guard(GuardOptions opts, const ShadowMonitor& monitor, const Frontier* frontier, Metrics* metrics,
        std::function<void(const std::string&)> log);
  /// The plan to run instead of `plan` (canonical text): `plan` itself when it has not tripped; counts the
  /// fallback in /metrics.
  std::string route(const std::string& plan);
  /// Whether `plan` has tripped (applying the rule to its current counts first).
  bool tripped(const std::string& plan);
  bool enabled() const { return opts_.epsilon > 0; }

 private:
  std::string next_safer(const std::string& plan);
  GuardOptions opts_;
  const ShadowMonitor& monitor_;
  const Frontier* frontier_;
  Metrics* metrics_;
  std::function<void(const std::string&)> log_;
  std::mutex mu_;
  std::set<std::string> tripped_;
};

}  // namespace vispco::serve
