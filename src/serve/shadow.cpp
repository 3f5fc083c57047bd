// Shadow sampling, agreement counts and their Wilson bound (see shadow.h).
#include "serve/shadow.h"

#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "serve/cost_meter.h"

namespace vispco::serve {

double wilson_lower(uint64_t k, uint64_t n, double z) {
  if (k > n) throw InvalidArgument("wilson_lower: k = " + std::to_string(k) + " > n = " + std::to_string(n));
  if (!(z > 0)) throw InvalidArgument("wilson_lower: z must be > 0");
  if (n == 0) return 0;
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double centre = p + z2 / (2 * nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return std::max(0.0, (centre - half) / (1 + z2 / nn));
}

double wilson_upper(uint64_t k, uint64_t n, double z) {
  if (k > n) throw InvalidArgument("wilson_upper: k = " + std::to_string(k) + " > n = " + std::to_string(n));
  if (!(z > 0)) throw InvalidArgument("wilson_upper: z must be > 0");
  if (n == 0) return 1;
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double centre = p + z2 / (2 * nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return std::min(1.0, (centre + half) / (1 + z2 / nn));
}

void ShadowOptions::validate() const {
  if (!(rate >= 0 && rate <= 1))
    throw InvalidArgument("shadow rate must be in [0, 1], got " + std::to_string(rate));
  if (!(z > 0)) throw InvalidArgument("shadow z must be > 0, got " + std::to_string(z));
}

ShadowMonitor::ShadowMonitor(ShadowOptions opts, Metrics* metrics)
    : opts_(opts), metrics_(metrics), rng_(opts.seed) {
  opts_.validate();
}

bool ShadowMonitor::draw(const std::string& plan, double temperature) {
  if (opts_.rate <= 0 || plan == "none" || temperature != 0) return false;
  bool drawn = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drawn = std::uniform_real_distribution<double>(0, 1)(rng_) < opts_.rate;
  }
  if (drawn && metrics_ != nullptr) metrics_->add("vispco_shadow_requests_total", 1, {{"plan", plan}});
  return drawn;
}

void ShadowMonitor::record(const std::string& plan, bool agreed) {
  Counts c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& e = counts_[plan];
    ++e.samples;
    e.agreements += agreed;
    c = e;
  }
  if (metrics_ == nullptr) return;
  char level[16];
  std::snprintf(level, sizeof level, "%.4g", opts_.z);
  metrics_->add("vispco_shadow_samples_total", 1, {{"plan", plan}});
  metrics_->add("vispco_shadow_agreements_total", agreed ? 1 : 0, {{"plan", plan}});
  metrics_->set("vispco_shadow_agreement_lower_bound", wilson_lower(c.agreements, c.samples, opts_.z),
                {{"plan", plan}, {"z", level}});
  metrics_->set("vispco_shadow_agreement_upper_bound", wilson_upper(c.agreements, c.samples, opts_.z),
                {{"plan", plan}, {"z", level}});
}

void ShadowMonitor::lost(const std::string& plan) {
  if (metrics_ != nullptr) metrics_->add("vispco_shadow_lost_total", 1, {{"plan", plan}});
}

ShadowMonitor::Counts ShadowMonitor::counts(const std::string& plan) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = counts_.find(plan);
  return it == counts_.end() ? Counts{} : it->second;
}

double ShadowMonitor::lower_bound(const std::string& plan) const {
  const Counts c = counts(plan);
  return wilson_lower(c.agreements, c.samples, opts_.z);
}

double ShadowMonitor::upper_bound(const std::string& plan) const {
  const Counts c = counts(plan);
  return wilson_upper(c.agreements, c.samples, opts_.z);
}

GenerationJob ShadowMonitor::shadow_job(const GenerationJob& pruned, const std::string& plan,
                                        const std::string& pruned_text) {
  GenerationJob s;
  s.request = pruned.request;
  s.gen = pruned.gen;
  s.plan = "none";
  s.question = pruned.question;
  s.stop = pruned.stop;
  s.on_result = [this, plan, pruned_text](const JobResult& r) {
    if (!r.error.empty()) return lost(plan);
    record(plan, r.text == pruned_text);
    if (metrics_ != nullptr)
      record_prefill_cost(*metrics_, plan, r.prefill_flops, r.prefill_flops_unpruned, 0, true);
  };
  return s;
}

}  // namespace vispco::serve
