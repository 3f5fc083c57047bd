// Bisection of a plan parameter against the FLOPs model; see budget.h.
#include "optimize/budget.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"

namespace vispco::optimize {

Bisection largest_within_budget(const std::vector<int64_t>& params,
                                const std::function<double(int64_t)>& cost, double budget) {
  if (params.empty()) throw InvalidArgument("budget bisection: no parameter values to search");
  for (size_t i = 1; i < params.size(); ++i)
    if (params[i] <= params[i - 1]) throw InvalidArgument("budget bisection: parameter values must ascend");
  if (std::isnan(budget)) throw InvalidArgument("budget bisection: the budget is NaN");
  Bisection b;
  const auto fits = [&](size_t i) {
    const double c = cost(params[i]);
    b.evaluated.emplace_back(params[i], c);
    return c <= budget;
  };
  if (fits(params.size() - 1)) {
    b.best = params.back();
    return b;
  }
  if (!fits(0)) return b;
  size_t good = 0, bad = params.size() - 1;  // cost(params[good]) ≤ budget < cost(params[bad])
  while (bad - good > 1) {
    const size_t mid = good + (bad - good) / 2;
    if (fits(mid))
      good = mid;
    else
      bad = mid;
  }
  b.best = params[good];
  return b;
}

nlohmann::json BudgetPlan::to_json() const {
  nlohmann::json bis = nlohmann::json::array();
  for (const auto& [p, c] : bisection) bis.push_back({{"param", p}, {"flops_ratio", c}});
  return {{"template", template_text},
          {"param", param ? nlohmann::json(*param) : nlohmann::json(nullptr)},
          {"param_text", param_text},
          {"plan", plan ? nlohmann::json(plan->to_string()) : nlohmann::json(nullptr)},
          {"flops_ratio", flops.llm},
          {"flops_ratio_with_vision", flops.with_vision},
          {"smallest_ratio", smallest_ratio},
          {"bisection", bis}};
}

BudgetPlan budget_plan(const PlanTemplate& tmpl, const ModelShape& shape, const std::vector<int64_t>& n_texts,
                       double budget, const std::vector<FlopsSpec>& images) {
  if (!(budget > 0.0 && budget <= 1.0))
    throw InvalidArgument("budget search: the FLOPs ratio budget must be in (0, 1], got " +
                          std::to_string(budget));
  if (n_texts.empty()) throw InvalidArgument("budget search: no prompts to cost");
  BudgetPlan r;
  r.template_text = tmpl.text();
  const auto ratio = [&](int64_t p) { return plan_flops_ratio(tmpl.at(p), shape, n_texts, images).llm; };
  std::vector<int64_t> params;  // the parameters whose plan fits the model (pool: K = s² only)
  for (int64_t p = tmpl.param_min(); p <= tmpl.param_max(); ++p)
    if (tmpl.valid_at(p)) params.push_back(p);
  if (params.empty())
    throw InvalidArgument("budget search: template '" + tmpl.text() + "' fits the model at no parameter");
  const Bisection b = largest_within_budget(params, ratio, budget);
  r.bisection = b.evaluated;
  r.smallest_ratio = ratio(params.front());
  if (b.best) {
    r.param = *b.best;
    r.param_text = tmpl.param_text(*b.best);
    r.plan = tmpl.at(*b.best);
    r.flops = plan_flops_ratio(*r.plan, shape, n_texts, images);
    if (r.flops.llm > budget)  // cannot happen: the bisection compared this very value
      throw InvalidArgument("budget search: internal error, chosen plan exceeds the budget");
  }
  return r;
}

}  // namespace vispco::optimize
