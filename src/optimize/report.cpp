// The optimize report: JSON (everything), Markdown (for people) and a terminal summary; see optimize.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "core/text_file.h"
#include "optimize/optimize.h"
#include "optimize/plan_check.h"
#include "optimize/search_method.h"
#include "optimize/searches.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

// printf of one number; "n/a" for NaN (an undefined ratio, e.g. retention of a zero-accuracy reference).
std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct(double v) { return fmt("%.1f", 100.0 * v); }

// "0.0312 [0.0101, 0.0534]" — a loss with its interval, or the loss alone.
std::string with_interval(double loss, const std::optional<LossInterval>& i) {
  std::string s = fmt("%.4f", loss);
  if (i) s += " [" + fmt("%.4f", i->lower) + ", " + fmt("%.4f", i->upper) + "]";
  return s;
}

// Whether the test split bears out a limit: holds / contradicts by the point estimate / contradicts outright.
std::string test_verdict(double loss, double limit, const std::optional<LossInterval>& i) {
  if (loss <= limit + 1e-12) return "holds on test";
  if (i && i->lower > limit + 1e-12)
    return "**the test split contradicts it** (the whole 95 % interval is above the limit)";
  return "**the test split contradicts it** by the point estimate (the 95 % interval still reaches the "
         "limit)";
}

// The chosen plan's calibration check, per family, worst family marked.
std::string family_check_table(const PlanCheck& c) {
  std::string md =
      "| family | n | acc. unpruned | acc. plan | retention | loss | " +
      std::string(c.family_confidence > 0 ? "loss bound (" + fmt("%.4f", c.family_confidence) + ")"
                                          : "compared") +
      " | E limit | within |\n|---|---:|---:|---:|---:|---:|---:|---:|:---:|\n";
  for (const auto& [name, f] : c.families)
    md += "| " + name + (name == c.worst_family ? " **(worst)**" : "") + " | " + std::to_string(f.n) + " | " +
          pct(f.reference_accuracy) + " | " + pct(f.accuracy) + " | " +
          fmt("%.3f", f.reference_accuracy > 0 ? f.accuracy / f.reference_accuracy : std::nan("")) + " | " +
          fmt("%.4f", f.loss) + " | " + (f.checked ? fmt("%.4f", f.compared) : "–") + " | " +
          (f.checked ? fmt("%.4f", f.limit) : "–") + " | " +
          (f.checked ? (f.within ? "yes" : "**no**") : "not checked") + " |\n";
  return md + "\n";
}

}  // namespace

std::string format_number(const char* format, double v) { return fmt(format, v); }

std::string format_pct(double v) { return pct(v); }

std::string epsilon_text(const OptimizeOptions& o) {
  const std::string eps = o.epsilon_absolute
                              ? "ε = " + pct(o.epsilon) + " points (absolute)"
                              : "ε = " + pct(o.epsilon) + " % of the unpruned accuracy (relative)";
  std::string extra;
  if (o.confidence > 0) extra += " at confidence " + fmt("%.2f", o.confidence);
  if (o.epsilon_per_family > 0)
    extra += ", every family within E = " + pct(o.epsilon_per_family) +
             (o.epsilon_absolute ? " points" : " % of its unpruned accuracy");
  if (o.min_speedup > 0) extra += ", measured prefill faster than unpruned";
  return eps + extra;
}

nlohmann::json OptimizeReport::to_json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : search.points) points.push_back(p.to_json());
  nlohmann::json curves = nlohmann::json::array();
  for (const auto& c : flops_curves) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& [k, r] : c.points) pts.push_back({k, r});
    curves.push_back({{"template", c.template_text}, {"points", pts}});
  }
  nlohmann::json checks = nlohmann::json::object();  // point index → its check against the constraints
  for (const auto& [i, c] : search.checks) checks[std::to_string(i)] = c.to_json();
  nlohmann::json j = {{"options", optimize::to_json(options)},
                      {"inputs", inputs},
                      {"n_visual", n_visual},
                      {"calibration",
                       {{"points", points},
                        {"frontier", search.frontier},
                        {"chosen", search.chosen ? nlohmann::json(*search.chosen) : nlohmann::json(nullptr)},
                        {"chosen_plan", search.chosen ? nlohmann::json(search.points[*search.chosen].plan)
                                                      : nlohmann::json(nullptr)},
                        {"chosen_reason", search.chosen_reason},
                        {"checks", checks}}},
                      {"details", search.details},
                      {"notes", search.notes},
                      {"test", test ? test->to_json() : nlohmann::json(nullptr)},
                      {"flops_curves", curves},
                      {"counts", {{"n_evaluated", n_evaluated}, {"n_from_store", n_from_store}}},
                      {"wall_s", wall_s},
                      {"plots", plots}};
  return j;
}

std::string OptimizeReport::to_markdown() const {
  const PlanSearch& method = find_plan_search(options.method);
  std::string md = "# vispco optimize — " + options.method + "\n\n";
  for (const auto& [k, v] : inputs.items())
    md += "- " + k + ": `" + (v.is_string() ? v.get<std::string>() : v.dump()) + "`\n";
  md += "- constraint: " + method.constraint_text(options) + "\n";
  if (const std::string rules = method.rules_text(options); !rules.empty()) md += "- rules: " + rules + "\n";
  md +=
      "- FLOPs ratio: LLM prefill (decoder + LM head at the last position) with the plan ÷ unpruned, summed "
      "over the split's prompts at their own text lengths (cost/flops.h; vision tower not pruned, so left "
      "out; the with-vision ratio is in optimize.json)" +
      std::string(std::any_of(search.points.begin(), search.points.end(),
                              [](const EvalPoint& p) { return p.keep_ratio > 0; })
                      ? "; a keep-ratio plan is costed at the nominal image's N_v = " +
                            std::to_string(n_visual) + " (its K column too), not at each image's own"
                      : "") +
      "\n";
  md += "- samples generated: " + std::to_string(n_evaluated) +
        ", read from the result store: " + std::to_string(n_from_store) + "; wall time " +
        fmt("%.1f", wall_s) + " s\n\n";

  md += "## Chosen plan\n\n";
  if (search.chosen) {
    const EvalPoint& c = search.points[*search.chosen];
    md += "`" + c.plan + "` — " + search.chosen_reason + ".\n\n";
    const EvalPoint& ref = search.points[0];
    const double loss = ref.accuracy - c.accuracy;
    md += "Calibration accuracy loss: " + fmt("%.4f", loss) + " (point estimate)";
    if (c.loss_bound)
      md += ", upper " + fmt("%.2f", c.loss_bound->confidence) + " confidence bound " +
            fmt("%.4f", c.loss_bound->upper) + " (" + c.loss_bound->method + ", " +
            std::to_string(c.loss_bound->lost) + " samples lost, " + std::to_string(c.loss_bound->gained) +
            " gained of " + std::to_string(c.loss_bound->n) + ")";
    if (const auto it = search.checks.find(*search.chosen); it != search.checks.end())
      md += "; limit " + fmt("%.4f", it->second.limit);
    md += ".\n\n";
    if (test) {
      md += "Test-split loss " +
            with_interval(test->reference.accuracy - test->chosen.accuracy, test->loss_interval) +
            (test->loss_interval ? " (95 % paired interval)" : "") + " against the limit " +
            fmt("%.4f", test->loss_limit) + " (ε on the test reference): " +
            test_verdict(test->reference.accuracy - test->chosen.accuracy, test->loss_limit,
                         test->loss_interval) +
            ".\n\n";
    }
    if (const auto it = search.checks.find(*search.chosen);
        it != search.checks.end() && !it->second.unpruned && !it->second.families.empty()) {
      md += "Per family on calibration:\n\n" + family_check_table(it->second);
    }
  } else {
    md += "None — " + search.chosen_reason + ".\n\n";
  }
  if (test) {
    const TestComparison& t = *test;
    const bool family_rule = options.epsilon_per_family > 0;
    md += "### On the test split (" + std::to_string(t.chosen.n) + " samples)\n\n";
    md += "Accuracy " + pct(t.chosen.accuracy) + " % vs " + pct(t.reference.accuracy) +
          " % unpruned: retention " + fmt("%.3f", t.retention) + "; LLM FLOPs ratio " +
          fmt("%.3f", t.chosen.flops.llm) + " (" +
          fmt("%.2f", t.chosen.flops.llm > 0 ? 1.0 / t.chosen.flops.llm : 0.0) + "× fewer; with vision " +
          fmt("%.3f", t.chosen.flops.with_vision) + "); measured prefill " +
          fmt("%.2f", t.reference.mean_prefill_ms) + " → " + fmt("%.2f", t.chosen.mean_prefill_ms) +
          " ms per sample: speedup " + fmt("%.2f", t.prefill_speedup) + "×" +
          (t.chosen.plan != "none" && !(t.prefill_speedup > 1.0) ? " — **not faster than unpruned on test**"
                                                                 : "") +
          ".\n\n";
    md += "| family | n | acc. unpruned | acc. plan | retention | loss [95 % interval] | " +
          std::string(family_rule ? "E limit | on test | " : "") + "FLOPs ratio | prefill speedup |\n" +
          "|---|---:|---:|---:|---:|---:|" + (family_rule ? "---:|---|" : "") + "---:|---:|\n";
    for (const auto& [name, f] : t.per_family) {
      const auto& cf = t.chosen.per_family.at(name);
      const auto& rf = t.reference.per_family.at(name);
      const bool worst = name == t.worst_family && t.chosen.plan != "none";
      md +=
          "| " + name + (worst ? " **(worst)**" : "") + " | " + std::to_string(cf.n) + " | " +
          pct(rf.accuracy) + " | " + pct(cf.accuracy) + " | " + fmt("%.3f", f.retention) + " | " +
          with_interval(f.loss, f.loss_interval) + " | " +
          (family_rule ? fmt("%.4f", f.limit) + " | " + test_verdict(f.loss, f.limit, f.loss_interval) + " | "
                       : "") +
          fmt("%.3f", f.flops_ratio) + " | " + fmt("%.2f", f.prefill_speedup) + "× |\n";
    }
    md += "| all | " + std::to_string(t.chosen.n) + " | " + pct(t.reference.accuracy) + " | " +
          pct(t.chosen.accuracy) + " | " + fmt("%.3f", t.retention) + " | " +
          with_interval(t.reference.accuracy - t.chosen.accuracy, t.loss_interval) + " | " +
          (family_rule
               ? fmt("%.4f", t.loss_limit) + " (ε) | " +
                     test_verdict(t.reference.accuracy - t.chosen.accuracy, t.loss_limit, t.loss_interval) +
                     " | "
               : "") +
          fmt("%.3f", t.chosen.flops.llm) + " | " + fmt("%.2f", t.prefill_speedup) + "× |\n\n";
    md +=
        "Prefill times are each sample's share of its batch's measured decoder prefill (so with --batch > 1 "
        "and "
        "batches that mix families, the per-family speedups repeat the overall one; --batch 1 times each "
        "sample "
        "alone); results read from the store keep the times measured when they were generated.\n\n";
  } else if (search.chosen && !options.evaluate_test) {
    md += "Not evaluated on the test split (--no-test).\n\n";
  }

  md += method.report_section(search.details);

  const double ref = search.points.empty() ? 0.0 : search.points[0].accuracy;
  md += "## Calibration points (" + std::to_string(search.points.empty() ? 0 : search.points[0].n) +
        " samples)\n\n";
  md +=
      "| # | plan | K or keep ratio | FLOPs ratio | accuracy | retention | prefill ms | speedup | loss bound "
      "| worst "
      "family | "
      "verdict | frontier |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|:---:|\n";
  for (size_t i = 0; i < search.points.size(); ++i) {
    const EvalPoint& p = search.points[i];
    const bool front = std::find(search.frontier.begin(), search.frontier.end(), i) != search.frontier.end();
    const bool chosen = search.chosen && *search.chosen == i;
    md += "| " + std::to_string(i) + " | `" + p.plan + "`" + (chosen ? " **(chosen)**" : "") + " | " +
          (p.keep_ratio > 0 ? fmt("%.1f", p.keep_ratio * 100) + "% (K " + std::to_string(p.keep) + ")"
                            : std::to_string(p.keep)) +
          " | " + fmt("%.4f", p.flops.llm) + " | " + pct(p.accuracy) + " | " +
          fmt("%.3f", ref > 0 ? p.accuracy / ref : std::nan("")) + " | " + fmt("%.2f", p.mean_prefill_ms) +
          " | ";
    const auto it = search.checks.find(i);
    if (it == search.checks.end() || it->second.unpruned) {
      md += "– | – | – | " + std::string(it == search.checks.end() ? "–" : "reference") + " | ";
    } else {
      const PlanCheck& c = it->second;
      std::string worst = "–";
      if (!c.worst_family.empty()) {
        const FamilyCheck& w = c.families.at(c.worst_family);
        worst = c.worst_family + " " + fmt("%.3f", w.compared) + " / " + fmt("%.3f", w.limit);
      }
      md += fmt("%.2f", c.measured_speedup) + "× | " + (c.bound ? fmt("%.4f", c.bound->upper) : "–") + " | " +
            worst + " | " + (c.acceptable() ? "ok" : c.rejection()) + " | ";
    }
    md += std::string(front ? "✓" : "") + " |\n";
  }
  md += "\n";
  if (!search.notes.empty()) {
    md += "## Notes\n\n";
    for (const auto& n : search.notes) md += "- " + n + "\n";
    md += "\n";
  }
  if (!plots.empty()) {
    md += "## Plots\n\n";
    for (const auto& p : plots) md += "![" + p + "](" + p + ")\n";
    md += "\n";
  }
  return md;
}

std::string OptimizeReport::summary() const {
  const PlanSearch& method = find_plan_search(options.method);
  std::string s = "optimize " + options.method + method.summary_templates(options);
  s += " on " + std::to_string(search.points.empty() ? 0 : search.points[0].n) + " calibration samples, " +
       method.constraint_text(options) + "\n";
  if (!search.chosen) return s + "  no plan chosen: " + search.chosen_reason + "\n";
  const EvalPoint& c = search.points[*search.chosen];
  s += "  chosen " + c.plan + ": calibration accuracy " + fmt("%.4f", c.accuracy) + " (unpruned " +
       fmt("%.4f", search.points[0].accuracy) + "), LLM FLOPs ratio " + fmt("%.3f", c.flops.llm) + "\n";
  if (test)
    s += "  test (" + std::to_string(test->chosen.n) + " samples): accuracy " +
         fmt("%.4f", test->chosen.accuracy) + " vs " + fmt("%.4f", test->reference.accuracy) +
         " unpruned, retention " + fmt("%.3f", test->retention) + ", FLOPs ratio " +
         fmt("%.3f", test->chosen.flops.llm) + ", measured prefill speedup " +
         fmt("%.2f", test->prefill_speedup) + "× (" + fmt("%.2f", test->reference.mean_prefill_ms) + " → " +
         fmt("%.2f", test->chosen.mean_prefill_ms) + " ms/sample)\n";
  if (test) {
    const double loss = test->reference.accuracy - test->chosen.accuracy;
    s += "  test loss " + with_interval(loss, test->loss_interval) + " vs limit " +
         fmt("%.4f", test->loss_limit) + ": " + test_verdict(loss, test->loss_limit, test->loss_interval) +
         "\n";
    if (!test->worst_family.empty() && test->chosen.plan != "none") {
      const auto& w = test->per_family.at(test->worst_family);
      s += "  worst family on test: " + test->worst_family + " retention " + fmt("%.3f", w.retention);
      if (options.epsilon_per_family > 0)
        s += ", loss " + with_interval(w.loss, w.loss_interval) + " vs E limit " + fmt("%.4f", w.limit) +
             ": " + test_verdict(w.loss, w.limit, w.loss_interval);
      s += "\n";
    }
  }
  if (!search.notes.empty()) s += "  " + std::to_string(search.notes.size()) + " note(s) in the report\n";
  return s;
}

void write_report(const OptimizeReport& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("optimize: cannot create the report folder '" + dir + "': " + ec.message());
  write_text_atomically((fs::path(dir) / "optimize.json").string(),
                        report.to_json().dump(2, ' ', false, kReplace) + "\n");
  write_text_atomically((fs::path(dir) / "optimize.md").string(), report.to_markdown());
}

}  // namespace vispco::optimize
