// Outputs of a VisPCO search: the curve as JSON and CSV (for the grid-frontier plotter of `vispco optimize`),
// a Markdown summary (per budget: accuracy, FLOPs ratio, achieved budget, plans; per family), and a
// self-contained gnuplot script (data inline) of accuracy vs FLOPs ratio, optionally with the grid frontier.
#pragma once
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "optimize/learned/evaluate.h"
#include "optimize/learned/trainer.h"

namespace vispco::optimize::learned {

/// The grid frontier a VisPCO curve is compared with (issue 8: "on the same figure as the grid frontier",
/// "search wall time next to the grid search's").
struct GridFrontier {
  /// (LLM prefill FLOPs ratio, accuracy) of the frontier points; accuracy as a fraction, or in % when > 1.
  std::vector<std::pair<double, double>> points;
  /// Wall time of the search that produced it, s; NaN when unknown (a CSV).
  double wall_s = std::numeric_limits<double>::quiet_NaN();
  std::string source;  ///< the file read
  /// Split the frontier was measured on ("calibration" for optimize.json; "" when unknown).
  std::string split;
  bool empty() const { return points.empty(); }
};

/// Everything a finished search reports.
struct SearchReport {
  SearchOptions options;
  std::string model;  ///< model folder
  std::string data;   ///< evaluation dataset (jsonl or folder)
  int64_t world_size = 1;
  SearchResult training;
  std::vector<BudgetPoint> points;  ///< one per evaluated budget (empty when evaluation was skipped)
  double eval_seconds = 0;          ///< all budgets
  std::string label;                ///< free text shown in the summary (e.g. "random weights")
  GridFrontier grid;                ///< the grid frontier to compare with (empty: none)
  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

/// The curve as CSV: header "method,kernel,budget,flops_ratio,accuracy,achieved_budget,flops_error,n,n_plans"
/// then one row per point, budgets ascending.
std::string curve_csv(const SearchReport& r);

/// Reads a grid frontier, either
/// - the optimize.json of `vispco optimize` (any method; `--method grid` gives the full frontier): the points
/// of
///   calibration.frontier with their flops_ratio and accuracy, and the search's wall_s; or
/// - a CSV of lines "flops_ratio,accuracy" (a header line and further columns are allowed; the first two
/// numeric
///   columns are used).
/// JSON is recognised by the file's first non-blank character '{'.
/// @throws IoError (unreadable), FormatError naming the file and the line or key.
GridFrontier read_grid_frontier(const std::string& path);

/// A gnuplot script drawing accuracy vs FLOPs ratio of the VisPCO points (and r.grid when not empty) into
/// `png_name` (pngcairo).
std::string curve_gnuplot(const SearchReport& r, const std::string& png_name);

/// Writes curve.json (to_json()), curve.csv, summary.md and curve.gp into `dir`, then runs `gnuplot curve.gp`
/// there when `gnuplot` is non-empty (curve.png). @return the PNG path, or "" when not drawn.
/// @throws IoError when a file cannot be written or gnuplot fails.
std::string write_search_outputs(const SearchReport& r, const std::string& dir, const std::string& gnuplot);

}  // namespace vispco::optimize::learned
