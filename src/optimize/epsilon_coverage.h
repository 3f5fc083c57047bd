// Does ε hold on the test split? (issue 18 "ε with confidence", issue 46 for the main job's rule): re-draw
// many calibration subsets of one size from a large pool of labelled samples, choose on each the smallest K
// of a ladder that meets the constraints — by point estimates, and by paired upper confidence bounds — and
// count how often the chosen K's loss on the test split exceeds ε overall, and E in its worst family. The
// constraints are the searches' own (plan_check.h: overall ε, optional per-family E with Bonferroni-joint
// bounds), so the experiment measures the rule `vispco optimize` applies. With the bound the violation rates
// should stay ≤ 1 − confidence. Pure: both tables come from evaluations already made
// (dynamic_k/ladder_eval.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "optimize/dynamic_k/ladder_table.h"

namespace vispco::optimize {

/// Settings of epsilon_coverage() (a plain value).
struct CoverageOptions {
  size_t n_calib =
      64;  ///< calibration subset size (the main job's), ≥ 1 and ≤ the pool (without replacement)
  size_t draws = 500;     ///< re-drawn subsets, ≥ 1
  double epsilon = 0.01;  ///< as min-k: relative (default) or absolute
  bool absolute = false;
  double confidence = 0.9;  ///< of the bound, in (0, 1)
  /// Per-family E as `vispco optimize --epsilon-per-family` (0 = off): in the rule on each draw, and in the
  /// test-split verdict for every family with ≥ min_family_n test samples.
  double epsilon_per_family = 0.0;
  size_t min_family_n = 30;  ///< families smaller than this in a draw (or on test) are not checked
  /// Draw each subset with replacement (a bootstrap of the pool; needed when n_calib is close to the pool
  /// size, where subsets without replacement barely differ); else without.
  bool with_replacement = false;
  uint64_t seed = 0;
};

/// What the draws gave. "Point" is the rule with point estimates, "bound" with the confidence bounds.
struct CoverageResult {
  CoverageOptions options;
  /// Fraction of draws whose chosen K loses more than ε on the test split (overall).
  double violation_rate_point = 0, violation_rate_bound = 0;
  /// Fraction of draws whose chosen K loses more than E on the test split in at least one checked family
  /// (0 when the per-family rule is off).
  double family_violation_rate_point = 0, family_violation_rate_bound = 0;
  /// Mean chosen K over the draws (the price of the guarantee).
  double mean_keep_point = 0, mean_keep_bound = 0;
  /// Mean LLM FLOPs ratio of the chosen K on the test split (Σ plan FLOPs ÷ Σ unpruned FLOPs).
  double mean_flops_point = 0, mean_flops_bound = 0;
  /// Per rung: test-split loss, whether it exceeds ε / some family's E, its FLOPs ratio, and how often each
  /// rule chose it.
  struct Rung {
    int64_t keep = 0;
    double test_loss = 0, flops_ratio = 1;
    bool test_violates = false, test_family_violates = false;
    std::string test_worst_family;  ///< the checked family with the largest loss − limit on test
    size_t chosen_point = 0, chosen_bound = 0;
  };
  std::vector<Rung> rungs;
  nlohmann::json to_json() const;
  /// A Markdown table of the rungs and the two rates (for reports and docs).
  std::string to_markdown() const;
};

/// The rule on each draw: the smallest rung that meets the constraints (plan_check.h: ε overall and, when
/// on, E per family; point estimates or bounds at `confidence`); the last rung (unpruned) always qualifies.
/// @throws InvalidArgument (bad options, tables of different ladders, a pool smaller than n_calib without
/// replacement).
CoverageResult epsilon_coverage(const LadderTable& pool, const LadderTable& test, const CoverageOptions& o);

}  // namespace vispco::optimize
