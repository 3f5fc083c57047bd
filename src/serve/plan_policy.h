// Which plan a request runs (issue 49): the plan it names (as before), else the cheapest frontier plan that
// meets its target or the server's default target (serve/frontier.h), else the server's default plan; then,
// for a plan the server chose, the guard's fallback (serve/guard.h); then, in arm(), the shadow draw
// (serve/shadow.h).
// What was chosen and why goes to the reply's `vispco` block.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "serve/frontier.h"
#include "serve/guard.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/shadow.h"

namespace vispco::serve {

/// The policy's settings (plain value).
struct PolicyOptions {
  std::optional<Frontier> frontier;  ///< --frontier (plans canonicalised by the PlanPolicy constructor)
  Target default_target;             ///< applies to requests that name neither a plan nor a target
  ShadowOptions shadow;
  GuardOptions guard;
};

/// A request's plan decision.
struct PlanChoice {
  std::string plan;        ///< canonical plan text the job runs
  std::string label;       ///< the plan its shadow comparison is counted under: the plan that ran
  bool shadowed = false;   ///< set by arm(): an unpruned rerun is queued after the reply
  double temperature = 0;  ///< the request's (only greedy requests are shadowed)
  nlohmann::json info;     ///< fields merged into the reply's vispco block
};

/// Thread-safe after construction.
class PlanPolicy {
 public:
  /// @throws ConfigError / InvalidArgument for a frontier plan the model cannot run, bad shadow / guard
  /// options, a default target without a frontier or one no frontier plan meets (naming the closest).
  PlanPolicy(BatchScheduler& scheduler, Metrics* metrics, PolicyOptions opts,
             std::function<void(const std::string&)> log = {});
  /// @param plan the request's vispco.plan ("" = none) @param target its target (may be empty)
  /// @param temperature its sampling temperature (only greedy requests are shadowed)
  /// @throws ApiError 400: a target without a frontier, an unmeetable target (naming the closest plan), a
  /// plan the model cannot run.
  PlanChoice choose(const std::string& plan, const Target& target, double temperature);
  /// Sets job.plan, draws the shadow (c.shadowed, c.info["shadowed"]; once the request has passed every
  /// check) and for a shadowed request sets the hook that queues its unpruned rerun after the answer.
  void arm(GenerationJob& job, PlanChoice& c);
  ShadowMonitor& shadow() { return shadow_; }
  Guard& guard() { return guard_; }
  const std::optional<Frontier>& frontier() const { return opts_.frontier; }

 private:
  BatchScheduler& scheduler_;
  PolicyOptions opts_;
  ShadowMonitor shadow_;
  Guard guard_;
};

}  // namespace vispco::serve
