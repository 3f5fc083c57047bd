// The rows of the search registry (search_method.h), one file each, and what the plan searches share.
#pragma once
#include <memory>

#include "optimize/optimize.h"
#include "optimize/plan_template.h"
#include "optimize/search_method.h"

namespace vispco::optimize {

/// min-k: smallest K within ε by binary search (min_k.h) on one K template. search_min_k.cpp.
const PlanSearch& min_k_search();
/// budget: per template the largest parameter within the FLOPs budget (budget.h), evaluated; the most
/// accurate on calibration is chosen. search_budget.cpp.
const PlanSearch& budget_search();
/// grid: every (template, K), Pareto frontier, the cheapest frontier plan within ε chosen. search_grid.cpp.
const PlanSearch& grid_search();
/// The command-line method of the plan search `name`: the shared flags, every plan search's section flags
/// (OptimizeOptions holds them all), then the optimize job and its report. search_plan_job.cpp.
std::unique_ptr<SearchMethod> make_plan_search_method(const std::string& name);
/// dynamic-k: per-image K from a light predictor (dynamic_k/dynamic_k.h). search_dynamic_k.cpp.
std::unique_ptr<SearchMethod> make_dynamic_k_method();
/// coverage: the ε-coverage experiment of the min-k/grid rule (coverage_run.h). search_coverage.cpp.
std::unique_ptr<SearchMethod> make_coverage_method();
/// vispco: the learned, budget-conditioned plan predictor (learned/). learned/search_vispco.cpp.
std::unique_ptr<SearchMethod> make_vispco_method();

/// Sets out.frontier from out.points (LLM FLOPs ratio, accuracy).
void set_frontier(SearchOutcome& out);
/// The lowest accuracy within ε of `reference` under the options' rule (relative or absolute).
double accuracy_threshold(const OptimizeOptions& o, double reference);
/// Checks out.points[i] against out.points[0] under the options' constraints (plan_check.h), stores the
/// check in out.checks[i] and its overall bound in the point's loss_bound. @throws what check_plan() throws.
const PlanCheck& check_point(const OptimizeOptions& o, SearchOutcome& out, size_t i);
/// The accuracy a search compares with the ε threshold: the point's own without a confidence level; with
/// one, reference accuracy − the upper confidence bound on the paired loss, so "≥ threshold" means "the
/// bound is within ε". The unpruned point is returned as is.
double accuracy_for_epsilon(const PlanCheck& c, const EvalPoint& reference, const EvalPoint& point);
/// Adds to out.notes, from out.checks: plans dropped only for not being faster than unpruned, plans within
/// the overall ε but not for some family, families too small to check, and plans whose measured and
/// FLOPs-model speedups disagree by more than the stated factor.
void add_check_notes(SearchOutcome& out, double timing_factor);
/// Sends a line to `log` when it is set.
void emit(const OptimizeLog& log, const std::string& line);

/// printf of one number as the report writes it; "n/a" for NaN. report.cpp.
std::string format_number(const char* format, double v);
/// A fraction as a percentage with one decimal ("12.5"). report.cpp.
std::string format_pct(double v);
/// The ε constraint of a search with an ε: "ε = 1.0 % of the unpruned accuracy (relative)" and its
/// confidence, per-family and speed rules. report.cpp.
std::string epsilon_text(const OptimizeOptions& o);

}  // namespace vispco::optimize
