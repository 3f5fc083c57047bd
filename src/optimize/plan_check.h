// Every constraint a search holds a plan to (issue 46): its overall accuracy loss against the unpruned model
// within ε, each question family's loss within E, both as a point estimate or — with a confidence level — as
// the upper confidence bound on the paired loss (confidence.h; over the families Bonferroni, so that all of
// them hold together at the stated level), and a measured prefill faster than unpruned. Also flags a plan
// whose measured speedup and FLOPs-model speedup disagree by more than a stated factor. Pure: figures come
// from EvalPoints (plan_evaluator.h), so the rules are tested on constructed points.
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "optimize/confidence.h"
#include "optimize/plan_evaluator.h"

namespace vispco::optimize {

/// The constraints of a search (a plain value; OptimizeOptions::constraints() fills it).
struct ConstraintOptions {
  /// Overall ε: relative to the unpruned accuracy (loss ≤ ε·ref) or absolute (loss ≤ ε). As OptimizeOptions.
  double epsilon = 0.01;
  bool absolute = false;
  /// 0: point estimates; in [0.5, 1): upper confidence bounds at this level (overall; and for the families,
  /// jointly, each at 1 − (1 − confidence)/F over the F families checked).
  double confidence = 0.0;
  /// Per-family E (same relative/absolute sense as ε, against each family's own unpruned accuracy); 0 = off.
  double epsilon_per_family = 0.0;
  /// Families with fewer calibration samples than this are not checked, and are named as such.
  size_t min_family_n = 30;
  /// A pruned plan must measure a prefill speedup (unpruned ms ÷ plan ms) strictly above this; 0 = off.
  double min_speedup = 1.0;
  /// Measured and FLOPs-model speedups that differ by more than this factor (either way) are flagged, > 1.
  double timing_factor = 2.0;
  bool operator==(const ConstraintOptions&) const = default;
};

/// One question family of one plan against its limit.
struct FamilyCheck {
  size_t n = 0;
  double reference_accuracy = 0, accuracy = 0;  ///< unpruned and plan, in [0, 1]
  double loss = 0;                              ///< reference_accuracy − accuracy (point estimate)
  double compared = 0;   ///< what is held to the limit: bound->upper with a confidence level, else loss
  double limit = 0;      ///< the largest allowed loss: E·reference_accuracy (relative) or E
  bool checked = false;  ///< false: fewer than min_family_n samples (or the rule is off)
  bool within = true;    ///< compared ≤ limit, or not checked
  std::optional<LossBound> bound;
};

/// One plan against every constraint.
struct PlanCheck {
  bool unpruned = false;  ///< the reference itself: acceptable by definition, nothing measured against it
  bool within_epsilon = true;
  double loss = 0;      ///< overall point loss
  double compared = 0;  ///< overall: bound's upper end with a confidence level, else loss
  double limit = 0;     ///< overall largest allowed loss
  std::optional<LossBound> bound;
  std::map<std::string, FamilyCheck> families;  ///< every family of the plan (checked or not)
  double family_confidence = 0;      ///< each family's bound level (0: point estimates or rule off)
  bool families_within = true;       ///< every checked family within its limit
  std::string worst_family;          ///< the checked family with the largest compared − limit ("" if none)
  std::vector<std::string> too_few;  ///< families not checked for too few samples (rule on only)
  double measured_speedup = 0;       ///< unpruned prefill ÷ plan prefill on the split; NaN when not measured
  double flops_speedup = 1;          ///< 1 ÷ LLM FLOPs ratio
  bool faster = true;                ///< measured_speedup > min_speedup (true when the rule is off)
  bool timing_disagrees = false;     ///< the two speedups differ by more than timing_factor
  /// All constraints hold.
  bool acceptable() const { return within_epsilon && families_within && faster; }
  /// Why not (one clause per failed constraint, "; "-joined); "" when acceptable.
  std::string rejection() const;
  nlohmann::json to_json() const;
};

/// Checks `plan` against `reference` (the unpruned model, same split). With a confidence level both points
/// need per-sample scores and families (EvalPoint::scores, ::families) in the same sample order.
/// @throws InvalidArgument when they are missing or differ in length.
PlanCheck check_plan(const ConstraintOptions& o, const EvalPoint& reference, const EvalPoint& plan);

/// The rules of check_plan() under `o`, in words, for reports.
std::string constraint_rules(const ConstraintOptions& o);

}  // namespace vispco::optimize
