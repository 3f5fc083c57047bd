// The smallest number of kept visual tokens K whose accuracy loss against the unpruned model stays within ε
// (DESIGN.md §6 "min-K under ε"), by binary search over K. Accuracy need not be monotone in K, so every
// probed point is recorded, points that contradict monotonicity are reported, and the rule the search follows
// is stated in the result. Pure: accuracy comes from a callback, so the search is tested without a model.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vispco::optimize {

/// Settings of min_k_search() (a plain value).
struct MinKOptions {
  /// Tolerated accuracy loss ε. Relative (default): accuracy(K) ≥ (1 − ε)·reference; valid [0, 1).
  /// Absolute: accuracy(K) ≥ reference − ε, accuracy as a fraction (0.01 = one percentage point); valid [0,
  /// 1].
  double epsilon = 0.01;
  bool absolute = false;
  /// Searched values: K ∈ {k_min, k_min + k_step, k_min + 2·k_step, …} ∩ [k_min, k_max], plus k_max itself.
  /// Valid: 1 ≤ k_min ≤ k_max, k_step ≥ 1. k_max = 0 means "not set" and fails validate().
  int64_t k_min = 1, k_max = 0, k_step = 1;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  /// The searched K values, ascending.
  std::vector<int64_t> candidates() const;
  bool operator==(const MinKOptions&) const = default;
};
nlohmann::json to_json(const MinKOptions& o);

/// One accuracy measurement at K.
struct KProbe {
  int64_t keep = 0;       ///< K
  double accuracy = 0.0;  ///< in [0, 1]
  bool within = false;    ///< accuracy ≥ threshold (the loss is within ε)
  int order = -1;         ///< 0-based probe order of the search; −1 for a known point given by the caller
  bool operator==(const KProbe&) const = default;
};

/// Two points, adjacent in K among all points seen, whose accuracy falls as K grows (K_low < K_high and
/// accuracy(K_low) > accuracy(K_high)): evidence that accuracy is not monotone in K.
struct MonotonicityViolation {
  KProbe low, high;
  /// True when the pair also crosses the threshold (K_low within ε, K_high not): being within ε is then not
  /// monotone either, and the search's answer may not be the smallest K within ε.
  bool crosses_threshold = false;
  /// "accuracy 0.410 at K=64 > 0.400 at K=72 (K=64 within ε, K=72 not)"; `value_text` writes a searched
  /// value (default "K=64"; a keep-ratio search: "keep 25.0%").
  std::string describe(const std::function<std::string(int64_t)>& value_text = {}) const;
};

/// What min_k_search() found.
struct MinKResult {
  double reference_accuracy = 0.0;  ///< accuracy of the unpruned model
  double threshold = 0.0;           ///< lowest accuracy within ε
  std::optional<int64_t> chosen;    ///< the answer; nullopt when not even k_max is within ε
  std::vector<KProbe> probes;       ///< search probes in probe order
  std::vector<KProbe> known;        ///< the caller's extra points at K the search did not probe, ascending K
  std::vector<MonotonicityViolation> violations;  ///< over probes ∪ known, ascending K
  /// The smallest K within ε among probes ∪ known (may be below `chosen` when there are violations).
  std::optional<int64_t> smallest_within_seen;
  std::string rule;  ///< the search rule, one paragraph (min_k_rule())
  nlohmann::json to_json() const;
};

/// The rule min_k_search() follows, in words (goes into reports).
std::string min_k_rule();

/// Binary search for the smallest K within ε.
///
/// Rule: let C = opts.candidates() ascending. C.back() = k_max is probed first; if it is not within ε there
/// is no answer. Otherwise the bracket [lo, hi] over C starts at [C.front(), k_max] and keeps the invariant
/// "C[hi] was probed within ε, and C[lo − 1] was probed not within ε (or lo = 0)"; each step probes
/// C[mid], mid = ⌊(lo + hi) / 2⌋, and sets hi = mid when it is within ε, else lo = mid + 1. The answer C[hi]
/// is therefore within ε while the next smaller candidate is not: it is the smallest K within ε whenever
/// "within ε" is monotone in K, and a boundary of the within-ε set otherwise. Each K is probed at most once
/// (about log₂|C| + 1 probes).
///
/// @param accuracy_at accuracy in [0, 1] at K (evaluated on the calibration split); called once per probe.
/// @param reference_accuracy the unpruned accuracy in [0, 1].
/// @param known extra (K → accuracy) points already measured (e.g. from a grid in the result store); they do
///        not steer the search but enter the violation check and smallest_within_seen.
/// @param also_within further constraints at K (e.g. per-family limits, plan_check.h), asked after
///        accuracy_at(K) for every probe and known point: a point is within ε only when its accuracy clears
///        the threshold and this returns true. Empty: accuracy alone.
/// @throws InvalidArgument (bad options, accuracies outside [0, 1] or NaN); what accuracy_at throws.
MinKResult min_k_search(const std::function<double(int64_t)>& accuracy_at, double reference_accuracy,
                        const MinKOptions& opts, const std::map<int64_t, double>& known = {},
                        const std::function<bool(int64_t)>& also_within = {});

}  // namespace vispco::optimize
