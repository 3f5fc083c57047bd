// Binary search for the smallest K within ε, with every probe recorded and monotonicity violations reported.
#include "optimize/min_k.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco::optimize {
namespace {

// Comparisons of accuracies (ratios of small integers) tolerate rounding of the threshold's arithmetic.
constexpr double kTol = 1e-12;

void check_accuracy(double a, const std::string& what) {
  if (!(a >= 0.0 && a <= 1.0))
    throw InvalidArgument("min-K search: " + what + " must be an accuracy in [0, 1], got " +
                          std::to_string(a));
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

nlohmann::json probe_json(const KProbe& p) {
  return {{"keep", p.keep}, {"accuracy", p.accuracy}, {"within_epsilon", p.within}, {"order", p.order}};
}

}  // namespace

void MinKOptions::validate() const {
  if (absolute ? !(epsilon >= 0.0 && epsilon <= 1.0) : !(epsilon >= 0.0 && epsilon < 1.0))
    throw InvalidArgument(std::string("min-K search: epsilon must be in ") +
                          (absolute ? "[0, 1]" : "[0, 1)") +
                          (absolute ? " (absolute, as an accuracy fraction: 0.01 = one point)"
                                    : " (relative to the unpruned accuracy: 0.01 = 1 %)") +
                          ", got " + std::to_string(epsilon));
  if (k_min < 1) throw InvalidArgument("min-K search: k_min must be ≥ 1, got " + std::to_string(k_min));
  if (k_max < k_min)
    throw InvalidArgument("min-K search: k_max must be ≥ k_min = " + std::to_string(k_min) + ", got " +
                          std::to_string(k_max));
  if (k_step < 1) throw InvalidArgument("min-K search: k_step must be ≥ 1, got " + std::to_string(k_step));
}

std::vector<int64_t> MinKOptions::candidates() const {
  validate();
  std::vector<int64_t> c;
  for (int64_t k = k_min; k < k_max; k += k_step) c.push_back(k);
  c.push_back(k_max);
  return c;
}

nlohmann::json to_json(const MinKOptions& o) {
  return {{"epsilon", o.epsilon},
          {"absolute", o.absolute},
          {"k_min", o.k_min},
          {"k_max", o.k_max},
          {"k_step", o.k_step}};
}

std::string MonotonicityViolation::describe(const std::function<std::string(int64_t)>& value_text) const {
  const auto at = [&](int64_t k) { return value_text ? value_text(k) : "K=" + std::to_string(k); };
  std::string s = "accuracy " + fmt(low.accuracy) + " at " + at(low.keep) + " > " + fmt(high.accuracy) +
                  " at " + at(high.keep);
  if (crosses_threshold) s += " (" + at(low.keep) + " within ε, " + at(high.keep) + " not)";
  return s;
}

nlohmann::json MinKResult::to_json() const {
  nlohmann::json probes_j = nlohmann::json::array(), known_j = nlohmann::json::array(),
                 viol_j = nlohmann::json::array();
  for (const auto& p : probes) probes_j.push_back(probe_json(p));
  for (const auto& p : known) known_j.push_back(probe_json(p));
  for (const auto& v : violations)
    viol_j.push_back({{"low", probe_json(v.low)},
                      {"high", probe_json(v.high)},
                      {"crosses_threshold", v.crosses_threshold},
                      {"text", v.describe()}});
  nlohmann::json j = {{"reference_accuracy", reference_accuracy},
                      {"threshold", threshold},
                      {"chosen_keep", chosen ? nlohmann::json(*chosen) : nlohmann::json(nullptr)},
                      {"probes", probes_j},
                      {"known", known_j},
                      {"violations", viol_j},
                      {"monotone_in_seen_points", violations.empty()},
                      {"smallest_within_seen", smallest_within_seen ? nlohmann::json(*smallest_within_seen)
                                                                    : nlohmann::json(nullptr)},
                      {"rule", rule}};
  return j;
}

std::string min_k_rule() {
  return "Binary search over the candidate K values C (ascending). K_max = C.back() is probed first; if it "
         "is "
         "not within ε, no K is chosen. Otherwise the bracket [lo, hi] over C keeps C[hi] probed within ε "
         "and "
         "C[lo−1] probed not within ε; each step probes C[⌊(lo+hi)/2⌋] and moves hi down to it when it is "
         "within ε, else lo above it. The chosen K is within ε and the next smaller candidate is not: it is "
         "the smallest K within ε whenever 'within ε' is monotone in K, and otherwise a boundary of the "
         "within-ε set. Every probed point (and every known point, e.g. from a grid in the result store) is "
         "checked for accuracy falling as K grows; such pairs are listed as violations, and a violation that "
         "crosses the threshold means a smaller K within ε may exist (smallest_within_seen).";
}

MinKResult min_k_search(const std::function<double(int64_t)>& accuracy_at, double reference_accuracy,
                        const MinKOptions& opts, const std::map<int64_t, double>& known,
                        const std::function<bool(int64_t)>& also_within) {
  opts.validate();
  check_accuracy(reference_accuracy, "the reference accuracy");
  MinKResult r;
  r.reference_accuracy = reference_accuracy;
  r.threshold = opts.absolute ? reference_accuracy - opts.epsilon : reference_accuracy * (1.0 - opts.epsilon);
  r.rule = min_k_rule();
  const auto within = [&](double a, int64_t k) {
    return a >= r.threshold - kTol && (!also_within || also_within(k));
  };

  const std::vector<int64_t> c = opts.candidates();
  std::map<int64_t, KProbe> seen;  // every probe, by K
  const auto probe = [&](size_t i) -> bool {
    const int64_t k = c[i];
    if (auto it = seen.find(k); it != seen.end())
      return it->second.within;  // never re-probed (cannot
                                 // happen by the invariant)
    const double a = accuracy_at(k);
    check_accuracy(a, "the accuracy at K=" + std::to_string(k));
    KProbe p{k, a, within(a, k), static_cast<int>(r.probes.size())};
    r.probes.push_back(p);
    seen.emplace(k, p);
    return p.within;
  };

  if (probe(c.size() - 1)) {
    size_t lo = 0, hi = c.size() - 1;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (probe(mid))
        hi = mid;
      else
        lo = mid + 1;
    }
    r.chosen = c[hi];
  }

  // Known points, then the violation check over everything seen, in K order.
  std::map<int64_t, KProbe> all = seen;
  for (const auto& [k, a] : known) {
    check_accuracy(a, "the known accuracy at K=" + std::to_string(k));
    if (seen.count(k)) continue;  // the search probed it: its own measurement is the record
    const KProbe p{k, a, within(a, k), -1};
    r.known.push_back(p);
    all.emplace(k, p);
  }
  const KProbe* prev = nullptr;
  for (const auto& [k, p] : all) {
    if (prev != nullptr && prev->accuracy > p.accuracy + kTol)
      r.violations.push_back({*prev, p, prev->within && !p.within});
    prev = &p;
    if (p.within && !r.smallest_within_seen) r.smallest_within_seen = k;
  }
  return r;
}

}  // namespace vispco::optimize
