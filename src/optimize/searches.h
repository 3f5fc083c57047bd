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
/// The accuracy a search compares with the ε threshold: the point's own without --confidence; with it,
/// reference accuracy − the upper confidence bound on the paired loss (also stored in point.loss_bound), so
/// "≥ threshold" means "the bound is within ε". The unpruned point is returned as is.
/// @throws InvalidArgument when the per-sample scores are missing.
double accuracy_for_epsilon(const OptimizeOptions& o, const EvalPoint& reference, EvalPoint& point);
/// Sends a line to `log` when it is set.
void emit(const OptimizeLog& log, const std::string& line);

}  // namespace vispco::optimize
