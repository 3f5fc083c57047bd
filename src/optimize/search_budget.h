// budget's own settings, a section of OptimizeOptions (optimize.h): the FLOPs budget b.
// search_budget.cpp holds budget's flags, validation, search and report section.
#pragma once
#include "core/json_fields.h"

namespace vispco::optimize {

/// The settings only budget reads (a plain value: defaults, JSON fields, equality).
struct BudgetSearchOptions {
  /// The largest allowed LLM FLOPs ratio b, in (0, 1] (0 = not set; budget's validation requires it).
  double flops_budget = 0.0;

  bool operator==(const BudgetSearchOptions&) const = default;
};
/// Its JSON keys: flops_budget.
const JsonFields<BudgetSearchOptions>& budget_search_fields();

}  // namespace vispco::optimize
