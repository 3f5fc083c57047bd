// FLOPs-budget search (FitPrune-style, DESIGN.md §6): for a plan template, the largest parameter (K, or the
// PyramidDrop ratio) whose FLOPs ratio from the analytic model is ≤ the budget b, found by bisection against
// the FLOPs model alone (no accuracy evaluation). The returned plan never exceeds the budget: its own ratio
// was computed and compared, whatever the shape of the cost function.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "model/shape.h"
#include "optimize/plan_flops.h"
#include "optimize/plan_template.h"

namespace vispco::optimize {

/// Result of largest_within_budget().
struct Bisection {
  std::optional<int64_t> best;                        ///< nullopt when even `lo` is over the budget
  std::vector<std::pair<int64_t, double>> evaluated;  ///< (p, cost(p)) in evaluation order
};

/// The largest p among `params` (ascending, distinct) with cost(p) ≤ budget, by bisection over the list,
/// assuming cost is non-decreasing in p. Invariant: the returned p had cost(p) ≤ budget evaluated, so the
/// budget is never exceeded even when the assumption fails (then p may not be the largest such value).
/// About log₂|params| + 2 evaluations.
/// @throws InvalidArgument when `params` is empty or not ascending, or the budget is NaN.
Bisection largest_within_budget(const std::vector<int64_t>& params,
                                const std::function<double(int64_t)>& cost, double budget);

/// The plan of one template that fits a FLOPs budget.
struct BudgetPlan {
  std::string template_text;        ///< the template searched
  std::optional<int64_t> param;     ///< chosen parameter (K or λ·1000); nullopt: nothing fits
  std::string param_text;           ///< "64" or "0.350"
  std::optional<PruningPlan> plan;  ///< the plan at `param`
  FlopsRatio flops;                 ///< its FLOPs ratio (llm ≤ budget when a plan was found)
  double smallest_ratio = 0;        ///< the ratio at the smallest parameter (why nothing fits)
  std::vector<std::pair<int64_t, double>> bisection;  ///< (parameter, FLOPs ratio) evaluated
  nlohmann::json to_json() const;
};

/// Bisects the template's parameter against the FLOPs model so that the LLM FLOPs ratio (FlopsRatio::llm)
/// over prompts of lengths `n_texts` (and, when given, of images of these FLOPs specs: plan_flops.h) is
/// ≤ `budget`. @param budget in (0, 1]. @throws InvalidArgument for a budget outside (0, 1] or an empty
/// `n_texts`.
BudgetPlan budget_plan(const PlanTemplate& tmpl, const ModelShape& shape, const std::vector<int64_t>& n_texts,
                       double budget, const std::vector<FlopsSpec>& images = {});

}  // namespace vispco::optimize
