// `vispco optimize`: choose a pruning plan under a constraint on a calibration split, then prove it on a test
// split (DESIGN.md §6, issue 7). The plan searches of the search registry (search_method.h) share this job:
// min-k (smallest K within ε, binary search), budget (best plan whose FLOPs ratio ≤ b, bisection against the
// FLOPs model), grid (every plan of a (template × K) grid, empirical Pareto frontier). Every accuracy comes
// from a PlanEvaluator (the result store makes repeated searches instant and lets killed ones resume).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "optimize/min_k.h"
#include "optimize/plan_check.h"
#include "optimize/plan_evaluator.h"
#include "optimize/search_budget.h"
#include "optimize/search_grid.h"
#include "optimize/search_min_k.h"

namespace vispco::optimize {

/// Settings of one plan search (a plain value: defaults, validate(), JSON round trip, equality). The shared
/// settings are its members; each plan search's own settings are a base section declared with that search
/// (search_min_k.h, search_budget.h, search_grid.h). Every section is always present: optimize.json holds
/// them all, as it always has.
struct OptimizeOptions : MinKSearchOptions, BudgetSearchOptions, GridSearchOptions {
  /// Plan search name from search_registry() (search_method.h): "min-k" | "budget" | "grid".
  std::string method = "min-k";
  /// Plan templates (plan_template.h). min-k: exactly one K or keep-ratio template; budget: one or more (K,
  /// keep ratio or PyramidDrop ratio), the best on calibration wins; grid: one or more K or keep-ratio
  /// templates. run_optimize() rewrites them by keep_as first (resolved_templates()).
  std::vector<std::string> templates;
  /// Whether one-stage templates without keep vary a count K or a keep ratio of each image's own N_v: "auto"
  /// (a ratio when n_visual_varies(shape): LLaVA-NeXT, Qwen2-VL, Qwen2.5-VL; a count for LLaVA-1.5),
  /// "ratio" or "count" (plan_template.h KeepAs).
  std::string keep_as = "auto";
  /// Tolerated accuracy loss ε: relative to the unpruned calibration accuracy (default), or absolute
  /// (accuracy fraction, 0.01 = one point) when epsilon_absolute. Relative valid [0, 1), absolute [0, 1].
  /// min-k: the constraint; grid: picks the cheapest frontier plan within ε as the chosen plan.
  double epsilon = 0.01;
  bool epsilon_absolute = false;
  /// Evaluate the chosen plan (and the unpruned model) on the test split.
  bool evaluate_test = true;
  /// ε with stated confidence (min-k, grid): 0 = off (a plan is within ε when its calibration accuracy is);
  /// else in [0.5, 1): a plan is within ε only when the upper confidence bound on its paired accuracy loss
  /// against the unpruned model (confidence.h) is. Not used by budget (it has no ε).
  double confidence = 0.0;
  /// Per-family E (min-k, grid): every question family with ≥ min_family_n calibration samples must keep
  /// its loss within E (relative to its own unpruned accuracy, or absolute with epsilon_absolute), by the
  /// point estimate or, with `confidence`, by Bonferroni-joint upper bounds (plan_check.h). 0 = off; else in
  /// (0, 1) (relative) or (0, 1] (absolute).
  double epsilon_per_family = 0.0;
  /// Families with fewer calibration samples are named in the report, not checked; ≥ 1.
  int64_t min_family_n = 30;
  /// Never slower than unpruned (min-k, grid): a pruned plan is chosen only when its measured calibration
  /// prefill speedup (unpruned ms ÷ plan ms) is > min_speedup; 0 = off, else ≥ 1 (1 = strictly faster).
  double min_speedup = 1.0;
  /// Measured and FLOPs-model prefill speedups that differ by more than this factor are flagged; > 1.
  double timing_factor = 2.0;

  /// The constraints a plan is checked against (plan_check.h).
  ConstraintOptions constraints() const;
  /// Checks everything that does not need the model: the shared settings, every section, then the rules of
  /// the method's plan search. @throws InvalidArgument naming the bad value.
  void validate() const;
  /// Also checks the templates (as resolved_templates() makes them) and K values against the model (N_v,
  /// layers, scorer hook points).
  void validate(const ModelShape& shape) const;
  /// `templates` with keep_as applied for this model (apply_keep_as(), plan_template.h).
  /// @throws InvalidArgument for a bad keep_as.
  std::vector<std::string> resolved_templates(const ModelShape& shape) const;
  /// The min-K settings these options imply for a template whose largest parameter is `param_max` (N_v for a
  /// K template, 1000 for a keep ratio in ‰): k_max = 0 becomes param_max.
  MinKOptions min_k_options(int64_t param_max) const;
  bool operator==(const OptimizeOptions&) const = default;
};
nlohmann::json to_json(const OptimizeOptions& o);
/// @throws InvalidArgument for unknown keys or bad values.
OptimizeOptions optimize_options_from_json(const nlohmann::json& j);

/// What a search found on the calibration split.
struct SearchOutcome {
  /// Every plan evaluated on calibration, in evaluation order; the unpruned model is points[0].
  std::vector<EvalPoint> points;
  /// Indices into points of the Pareto frontier in (LLM FLOPs ratio, accuracy) (pareto.h).
  std::vector<size_t> frontier;
  /// Index into points of the chosen plan; nullopt when no plan meets the constraint.
  std::optional<size_t> chosen;
  /// Each checked point against the constraints (plan_check.h), by index into points (min-k, grid).
  std::map<size_t, PlanCheck> checks;
  /// Why this plan (one line), or why none.
  std::string chosen_reason;
  /// Method-specific record: min-k probes, violations and rule; budget bisections; grid skipped plans.
  nlohmann::json details = nlohmann::json::object();
  /// Things the user should know (violations, skipped plans), one line each.
  std::vector<std::string> notes;
};

/// Called with one progress line (plan being evaluated, search step); may be empty.
using OptimizeLog = std::function<void(const std::string&)>;

/// The chosen plan against the unpruned model on the test split.
struct TestComparison {
  EvalPoint reference;  ///< unpruned on test
  EvalPoint chosen;     ///< the chosen plan on test
  /// chosen.accuracy ÷ reference.accuracy; NaN (null in JSON, "n/a" in text) when the reference is 0.
  double retention = 0;
  double prefill_speedup = 0;  ///< reference.mean_prefill_ms ÷ chosen.mean_prefill_ms (measured); NaN if 0
  /// The test-split loss (reference − chosen accuracy) with its two-sided 95 % paired interval
  /// (paired_loss_interval(), confidence.h); nullopt without per-sample scores.
  std::optional<LossInterval> loss_interval;
  /// Largest allowed test loss under the search's ε (relative to the test reference, or absolute).
  double loss_limit = 0;
  /// Per family: retention, FLOPs ratio, measured prefill speedup, and (with per-sample scores) the test
  /// loss, its 95 % interval and the limit E applied to it (0 when the per-family rule is off).
  struct Family {
    double retention = 0, flops_ratio = 1, prefill_speedup = 0;
    double loss = 0, limit = 0;
    std::optional<LossInterval> loss_interval;
  };
  std::map<std::string, Family> per_family;
  /// The family of lowest retention ("" without families).
  std::string worst_family;
  nlohmann::json to_json() const;
};

/// The FLOPs-model curve of a K or keep-ratio template: (K or keep ratio in ‰, LLM FLOPs ratio) at the
/// calibration prompts (a keep ratio costed at the nominal N_v), for plots.
struct FlopsCurve {
  std::string template_text;
  std::vector<std::pair<int64_t, double>> points;
};

/// Everything `vispco optimize` reports (optimize.json / optimize.md).
struct OptimizeReport {
  OptimizeOptions options;
  nlohmann::json inputs = nlohmann::json::object();  ///< model, datasets, limits, store (as given)
  int64_t n_visual = 0;                              ///< N_v of the model
  SearchOutcome search;
  std::optional<TestComparison> test;  ///< when a plan was chosen and options.evaluate_test
  std::vector<FlopsCurve> flops_curves;
  size_t n_evaluated = 0, n_from_store = 0;  ///< samples generated / read from the store, all evaluations
  double wall_s = 0;
  std::vector<std::string> plots;  ///< plot files written (paths relative to the report folder)
  nlohmann::json to_json() const;
  /// The Markdown report: settings, chosen plan with test figures, the calibration table with the frontier
  /// marked, method details (min-k probes and violations with the rule), notes.
  std::string to_markdown() const;
  /// A few lines for the terminal: the chosen plan, calibration accuracy, test retention, FLOPs ratio and
  /// measured prefill speedup.
  std::string summary() const;
};

/// Writes `dir`/optimize.json (to_json()) and `dir`/optimize.md (to_markdown()), each through a temporary
/// file and a rename; creates `dir`. @throws IoError.
void write_report(const OptimizeReport& report, const std::string& dir);

/// Runs the plan search of options.method (find_plan_search(), search_method.h), then (evaluate_test) the
/// chosen plan and the unpruned model on test.
/// @throws InvalidArgument (bad options), what the evaluator throws.
OptimizeReport run_optimize(const OptimizeOptions& options, PlanEvaluator& evaluator,
                            const OptimizeLog& log = {});

/// Compares a plan's test point with the unpruned one; the limits are the search's ε and E applied to the
/// test reference (0 = no limit reported).
TestComparison compare_on_test(const EvalPoint& reference, const EvalPoint& chosen,
                               const ConstraintOptions& limits = {});

}  // namespace vispco::optimize
