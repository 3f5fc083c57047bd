// The searches behind search_registry() (optimize.h), one file each, and what they share.
#pragma once
#include "optimize/optimize.h"
#include "optimize/plan_template.h"

namespace vispco::optimize {

/// min-k: smallest K within ε by binary search (min_k.h) on one K template. search_min_k.cpp.
SearchOutcome search_min_k(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log);
/// budget: per template the largest parameter within the FLOPs budget (budget.h), evaluated; the most
/// accurate on calibration is chosen. search_budget.cpp.
SearchOutcome search_budget(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log);
/// grid: every (template, K), Pareto frontier, the cheapest frontier plan within ε chosen. search_grid.cpp.
SearchOutcome search_grid(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log);

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

}  // namespace vispco::optimize
