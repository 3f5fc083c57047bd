// The shadow-agreement guard and its fallback rule (see guard.h).
#include "serve/guard.h"

#include <cmath>
#include <cstdio>

#include "core/errors.h"

namespace vispco::serve {

void GuardOptions::validate() const {
  if (epsilon == 0) return;
  if (!(epsilon > 0 && epsilon < 1))
    throw InvalidArgument("guard epsilon must be in (0, 1), got " + std::to_string(epsilon));
  if (min_samples < 1)
    throw InvalidArgument("guard min samples must be ≥ 1, got " + std::to_string(min_samples));
}

Guard::Guard(GuardOptions opts, const ShadowMonitor& monitor, const Frontier* frontier, Metrics* metrics,
             std::function<void(const std::string&)> log)
    : opts_(opts), monitor_(monitor), frontier_(frontier), metrics_(metrics), log_(std::move(log)) {
  opts_.validate();
}

bool Guard::tripped(const std::string& plan) {
  if (opts_.epsilon <= 0 || plan == "none") return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tripped_.count(plan) > 0) return true;
  }
  const auto c = monitor_.counts(plan);
  if (static_cast<int64_t>(c.samples) < opts_.min_samples) return false;
  const double bound = wilson_upper(c.agreements, c.samples, monitor_.options().z);
  if (!(bound < 1 - opts_.epsilon)) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tripped_.insert(plan).second) return true;  // tripped meanwhile by another thread: logged there
  }
  if (metrics_ != nullptr) metrics_->add("vispco_guard_trips_total", 1, {{"plan", plan}});
  if (log_) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%lu of %lu shadow answers agree, agreement upper bound %.4f: loss ≥ %.4f > ε = %.4g",
                  static_cast<unsigned long>(c.agreements), static_cast<unsigned long>(c.samples), bound,
                  1 - bound, opts_.epsilon);
    log_("guard: plan " + plan + " taken out of service (" + buf + "); its requests now run " +
         next_safer(plan));
  }
  return true;
}

std::string Guard::next_safer(const std::string& plan) {
  const FrontierPlan* p = frontier_ != nullptr ? frontier_->find(plan) : nullptr;
  if (p == nullptr) return "none";
  for (const auto& q : frontier_->plans())  // cheapest first
    if (q.judged_loss() < p->judged_loss() && q.plan != plan && !tripped(q.plan)) return q.plan;
  return "none";
}

std::string Guard::route(const std::string& plan) {
  if (!tripped(plan)) return plan;
  const std::string to = next_safer(plan);
  if (metrics_ != nullptr) metrics_->add("vispco_guard_fallbacks_total", 1, {{"from", plan}, {"to", to}});
  return to;
}

}  // namespace vispco::serve
