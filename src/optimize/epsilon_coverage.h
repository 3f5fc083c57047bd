// Does ε hold on the test split? (issue 18 "ε with confidence"): re-draw many calibration subsets of one size
// from a large pool of labelled samples, choose on each the smallest K of a ladder whose calibration loss is
// within ε — by the point estimate, and by the paired upper confidence bound (confidence.h) — and count how
// often the chosen K's loss on the test split exceeds ε. With the bound the rate should stay ≤ 1 −
// confidence. Pure: both tables come from evaluations already made (dynamic_k/ladder_eval.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "optimize/dynamic_k/ladder_table.h"

namespace vispco::optimize {

/// Settings of epsilon_coverage() (a plain value).
struct CoverageOptions {
  size_t n_calib = 64;    ///< calibration subset size (the main job's), ≥ 1 and ≤ the pool
  size_t draws = 500;     ///< re-drawn subsets, ≥ 1
  double epsilon = 0.01;  ///< as min-k: relative (default) or absolute
  bool absolute = false;
  double confidence = 0.9;  ///< of the bound, in (0, 1)
  uint64_t seed = 0;
};

/// What the draws gave.
struct CoverageResult {
  CoverageOptions options;
  /// Fraction of draws whose chosen K loses more than ε on the test split (point estimate / bound).
  double violation_rate_point = 0, violation_rate_bound = 0;
  /// Mean chosen K over the draws (the price of the guarantee).
  double mean_keep_point = 0, mean_keep_bound = 0;
  nlohmann::json to_json() const;
};

/// The rule on each draw: the smallest rung whose subset loss (point) or loss bound is within ε; the last
/// rung (unpruned) always qualifies. @throws InvalidArgument (bad options, tables of different ladders, a
/// pool smaller than n_calib).
CoverageResult epsilon_coverage(const LadderTable& pool, const LadderTable& test, const CoverageOptions& o);

}  // namespace vispco::optimize
