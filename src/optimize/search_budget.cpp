// budget: for each template, the largest parameter whose LLM FLOPs ratio at the calibration prompts is ≤ b
// (bisection against the FLOPs model, budget.h); each such plan is evaluated on calibration and the most
// accurate wins (ties: the cheaper, then the earlier template). FitPrune (Ye et al., AAAI 2025) searches its
// pruning recipe against a computation budget the same way, before any accuracy is measured. Its registry
// row: settings (search_budget.h), flags, validation, search and report section.
#include "optimize/search_budget.h"

#include <cstdio>

#include "core/errors.h"
#include "optimize/budget.h"
#include "optimize/job_flags.h"
#include "optimize/search_flags.h"
#include "optimize/searches.h"

namespace vispco::optimize {

const JsonFields<BudgetSearchOptions>& budget_search_fields() {
  static const JsonFields<BudgetSearchOptions> fields("optimize options",
                                                      {{"flops_budget", &BudgetSearchOptions::flops_budget}});
  return fields;
}

namespace {

SearchOutcome search_budget(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) {
  const ModelShape& shape = ev.shape();
  SearchOutcome out;
  emit(log, "budget: unpruned reference on calibration");
  out.points.push_back(ev.evaluate(PruningPlan{}, Split::kCalib));
  nlohmann::json candidates = nlohmann::json::array();
  for (const std::string& text : o.templates) {
    const PlanTemplate t = PlanTemplate::parse(text, shape);
    const BudgetPlan bp =
        budget_plan(t, shape, ev.text_lengths(Split::kCalib), o.flops_budget, ev.image_flops(Split::kCalib));
    nlohmann::json c = bp.to_json();
    if (!bp.plan) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "template %s: no plan within the budget %.4f (its smallest FLOPs ratio is %.4f)",
                    text.c_str(), o.flops_budget, bp.smallest_ratio);
      out.notes.push_back(buf);
      candidates.push_back(c);
      continue;
    }
    emit(log, "budget " + text + ": largest parameter within FLOPs ratio " + std::to_string(o.flops_budget) +
                  " is " + bp.param_text + " (" + bp.plan->to_string() + ")");
    out.points.push_back(ev.evaluate(*bp.plan, Split::kCalib, text, *bp.param));
    c["point"] = out.points.size() - 1;
    candidates.push_back(c);
    const EvalPoint& p = out.points.back();
    if (p.flops.llm > o.flops_budget)  // the calibration prompts are the ones bisected on: cannot happen
      throw InvalidArgument("budget search: internal error, " + p.plan + " exceeds the budget");
    if (!out.chosen) {
      out.chosen = out.points.size() - 1;
      continue;
    }
    const EvalPoint& best = out.points[*out.chosen];
    if (p.accuracy > best.accuracy || (p.accuracy == best.accuracy && p.flops.llm < best.flops.llm))
      out.chosen = out.points.size() - 1;
  }
  out.details = {{"budget", o.flops_budget},
                 {"ratio",
                  "LLM prefill FLOPs (decoder + LM head at the last position) with the plan ÷ unpruned, "
                  "summed over the calibration prompts at their own text lengths"},
                 {"candidates", candidates}};
  char buf[256];
  if (out.chosen) {
    const EvalPoint& c = out.points[*out.chosen];
    std::snprintf(
        buf, sizeof buf,
        "most accurate of %zu candidate(s) within FLOPs ratio %.4f: calibration accuracy %.4f at FLOPs "
        "ratio %.4f",
        out.points.size() - 1, o.flops_budget, c.accuracy, c.flops.llm);
  } else {
    std::snprintf(buf, sizeof buf, "no template has a plan with FLOPs ratio ≤ %.4f", o.flops_budget);
  }
  out.chosen_reason = buf;
  set_frontier(out);
  return out;
}

std::string budget_section(const nlohmann::json& d) {
  std::string md = "## Budget search\n\nFLOPs ratio: " + d.value("ratio", "") + ".\n\n";
  md += "| template | parameter | plan | FLOPs ratio | FLOPs-model evaluations |\n|---|---:|---|---:|---:|\n";
  for (const auto& c : d["candidates"])
    md += "| `" + c["template"].get<std::string>() + "` | " + c.value("param_text", "–") + " | " +
          (c["plan"].is_null() ? std::string("none fits") : "`" + c["plan"].get<std::string>() + "`") +
          " | " + format_number("%.4f", c.value("flops_ratio", 0.0)) + " | " +
          std::to_string(c["bisection"].size()) + " |\n";
  return md + "\n";
}

class BudgetSearch final : public PlanSearch {
 public:
  void add_flags(SearchFlags& flags, OptimizeOptions& o) const override {
    flags.option("--flops-ratio", &o.flops_budget, "budget: largest allowed LLM FLOPs ratio, in (0, 1]");
  }
  std::vector<std::string> templates(const std::string& method, const JobFlags& j) const override {
    return scorer_templates(method, j, true);  // --layers: one template per layer
  }
  void validate(const OptimizeOptions& o) const override {
    if (!(o.flops_budget > 0.0 && o.flops_budget <= 1.0))
      throw InvalidArgument("optimize --method budget: --flops-ratio must be in (0, 1], got " +
                            std::to_string(o.flops_budget));
    if (o.confidence != 0.0)
      throw InvalidArgument(
          "optimize --method budget has no ε: --confidence applies to min-k, grid and dynamic-k");
    if (o.epsilon_per_family != 0.0)
      throw InvalidArgument(
          "optimize --method budget has no ε: --epsilon-per-family applies to min-k and grid");
  }
  bool takes_ratio_templates() const override { return true; }
  SearchOutcome run(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) const override {
    return search_budget(o, ev, log);
  }
  std::string constraint_text(const OptimizeOptions& o) const override {
    return "LLM FLOPs ratio ≤ " + format_number("%.4f", o.flops_budget);
  }
  std::string rules_text(const OptimizeOptions&) const override { return ""; }  // no ε
  std::string report_section(const nlohmann::json& details) const override { return budget_section(details); }
};

}  // namespace

const PlanSearch& budget_search() {
  static const BudgetSearch search;
  return search;
}

}  // namespace vispco::optimize
