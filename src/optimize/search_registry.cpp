// The search registry table and the defaults of PlanSearch; see search_method.h.
#include "core/errors.h"
#include "optimize/job_flags.h"
#include "optimize/search_method.h"
#include "optimize/searches.h"

namespace vispco::optimize {

const std::vector<SearchEntry>& search_registry() {
  const auto plan = [](const char* name) { return [name] { return make_plan_search_method(name); }; };
  static const std::vector<SearchEntry> table = {
      {"min-k",
       "smallest K whose calibration accuracy loss is within ε, by binary search over K (DESIGN.md §6)",
       plan("min-k"), &min_k_search()},
      {"budget",
       "best plan whose LLM FLOPs ratio is ≤ b: parameter bisected against the FLOPs model (FitPrune-style), "
       "then evaluated",
       plan("budget"), &budget_search()},
      {"grid", "every (template, K) plan evaluated; empirical Pareto frontier of accuracy vs FLOPs ratio",
       plan("grid"), &grid_search()},
      {"dynamic-k",
       "per-image K from a light MLP predictor trained on ladder labels (--train, --ladder; issue 18)",
       make_dynamic_k_method},
      {"coverage",
       "how often the min-k/grid rule's chosen K loses more than ε (and E per family) on --test, over "
       "--coverage-draws calibration subsets of --limit-calib samples drawn from --train (issue 46)",
       make_coverage_method},
      {"vispco",
       "VisPCO (Ji et al., ACL 2026): learn per-layer pruning plans for FLOPs budgets, evaluate the curve on "
       "--data (also `vispco vispco-search`)",
       make_vispco_method},
  };
  return table;
}

namespace {

// "a, b, c": the names of the rows `keep` accepts.
template <class Keep>
std::string names(Keep keep) {
  std::string out;
  for (const auto& e : search_registry())
    if (keep(e)) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

}  // namespace

const SearchEntry& find_search(const std::string& name) {
  for (const auto& e : search_registry())
    if (e.name == name) return e;
  throw InvalidArgument("optimize: unknown method '" + name +
                        "' (valid: " + names([](const SearchEntry&) { return true; }) + ")");
}

const PlanSearch& find_plan_search(const std::string& name) {
  for (const auto& e : search_registry())
    if (e.name == name && e.plan) return *e.plan;
  const std::string valid = names([](const SearchEntry& e) { return e.plan != nullptr; });
  for (const auto& e : search_registry())
    if (e.name == name)
      throw InvalidArgument("optimize: method '" + name + "' runs its own job (`vispco optimize --method " +
                            name + "`), not a plan search (valid: " + valid + ")");
  throw InvalidArgument("optimize: unknown method '" + name + "' (valid: " + valid + ")");
}

std::vector<std::string> PlanSearch::templates(const std::string& method, const JobFlags& j) const {
  return scorer_templates(method, j, false);
}

void PlanSearch::validate(const OptimizeOptions&, const std::vector<PlanTemplate>&, int64_t) const {}

std::string PlanSearch::rules_text(const OptimizeOptions& o) const {
  return constraint_rules(o.constraints());
}

std::string PlanSearch::summary_templates(const OptimizeOptions& o) const {
  if (o.templates.empty()) return "";
  return " (" + o.templates[0] + (o.templates.size() > 1 ? ", …" : "") + ")";
}

}  // namespace vispco::optimize
