// The search registry (STYLE.md: one registry table per kind): every `vispco optimize --method NAME` is one
// row. min-k, budget and grid are plan searches (the optimize job runs them on a PlanEvaluator and writes
// optimize.json); dynamic-k, coverage and vispco run their own job and write their own report. A row's files
// hold its method's options, flags, validation, run and report section; nothing outside them names a method.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "optimize/optimize.h"
#include "optimize/plan_template.h"

namespace vispco::optimize {

struct JobFlags;
class SearchFlags;

/// What a plan search adds to the optimize job (run_optimize(), optimize.h) and its report. Stateless: one
/// instance per method, shared.
class PlanSearch {
 public:
  virtual ~PlanSearch() = default;
  /// Declares the flags of its own section of OptimizeOptions (min-k: --k-min, …), bound to `o`.
  virtual void add_flags(SearchFlags& flags, OptimizeOptions& o) const = 0;
  /// The plan templates the shared flags describe (default: one scorer at --layer, scorer_templates()).
  /// @param method its registry name, for messages @throws InvalidArgument naming the flag.
  virtual std::vector<std::string> templates(const std::string& method, const JobFlags& j) const;
  /// Checks its own rules on `o` after OptimizeOptions::validate()'s shared checks (e.g. min-k: one
  /// template). @throws InvalidArgument naming the value.
  virtual void validate(const OptimizeOptions& o) const = 0;
  /// Checks its rules against the model: `templates` are o.templates parsed, `n_visual` is N_v (default:
  /// none).
  virtual void validate(const OptimizeOptions& o, const std::vector<PlanTemplate>& templates,
                        int64_t n_visual) const;
  /// Whether its templates may vary a PyramidDrop ratio instead of K (default: no).
  virtual bool takes_ratio_templates() const { return false; }
  /// The search on the calibration split. @throws InvalidArgument, what the evaluator throws.
  virtual SearchOutcome run(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) const = 0;
  /// The constraint as the report and the summary state it (e.g. "accuracy loss within ε = 1.0 % …").
  virtual std::string constraint_text(const OptimizeOptions& o) const = 0;
  /// The report's "rules" line (default: constraint_rules(), plan_check.h); "" for none.
  virtual std::string rules_text(const OptimizeOptions& o) const;
  /// Its section of optimize.md, from SearchOutcome::details ("" for none).
  virtual std::string report_section(const nlohmann::json& details) const = 0;
  /// What the terminal summary adds after the method name (default: " (first template[, …])").
  virtual std::string summary_templates(const OptimizeOptions& o) const;
};

/// One `vispco optimize --method NAME` as the command runs it: its flags and its whole run. Made fresh for
/// each command by its registry row; its flags are bound to its own members.
class SearchMethod {
 public:
  virtual ~SearchMethod() = default;
  /// Declares the flags it reads (SearchFlags::begin() has named it).
  virtual void add_flags(SearchFlags& flags) = 0;
  /// Runs with the parsed flags (SearchFlags::finish() done): checks them before anything slow, loads the
  /// model and data, searches, writes its report under its output folder and prints its summary (or its JSON)
  /// on `out`; progress and the dtype line go to stderr. @throws InvalidArgument, IoError, what the search
  /// throws.
  virtual void run(const SearchFlags& flags, std::ostream& out) = 0;
};

/// One row of the search registry.
struct SearchEntry {
  std::string name;
  std::string description;  ///< one line, with its source (the --method help)
  std::function<std::unique_ptr<SearchMethod>()> make;
  /// The plan search of a method the optimize job runs; nullptr for a method with its own job.
  const PlanSearch* plan = nullptr;
};

/// The search registry table (name → method), in display order.
const std::vector<SearchEntry>& search_registry();
/// @throws InvalidArgument "optimize: unknown method 'X' (valid: …)" listing every registered name.
const SearchEntry& find_search(const std::string& name);
/// The plan search `name`. @throws InvalidArgument listing the plan searches (the methods run_optimize()
/// runs).
const PlanSearch& find_plan_search(const std::string& name);

}  // namespace vispco::optimize
