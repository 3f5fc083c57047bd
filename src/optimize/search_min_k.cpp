// min-k: the smallest K within ε on the calibration split, by binary search (min_k.h) over one K template, or
// the smallest keep ratio (in ‰ of each image's own N_v) over one keep-ratio template.
// Plans of the same template already complete in the result store (e.g. from a grid) join as known points:
// free evidence for the monotonicity check, never steering the search. Its registry row: settings
// (search_min_k.h), flags, validation, search and report section.
#include "optimize/search_min_k.h"

#include <cstdio>
#include <map>

#include "core/errors.h"
#include "optimize/search_flags.h"
#include "optimize/searches.h"

namespace vispco::optimize {

void MinKSearchOptions::validate() const {
  if (k_min < 1) throw InvalidArgument("optimize: --k-min must be ≥ 1, got " + std::to_string(k_min));
  if (k_max < 0)
    throw InvalidArgument("optimize: --k-max must be ≥ 0 (0 = N_v), got " + std::to_string(k_max));
  if (k_max != 0 && k_max < k_min)
    throw InvalidArgument("optimize: --k-max " + std::to_string(k_max) + " is below --k-min " +
                          std::to_string(k_min));
  if (k_step < 1) throw InvalidArgument("optimize: --k-step must be ≥ 1, got " + std::to_string(k_step));
}

void MinKSearchOptions::validate(int64_t param_max, bool keep_ratio) const {
  if (k_max > param_max || k_min > param_max)
    throw InvalidArgument("optimize: the min-K range [" + std::to_string(k_min) + ", " +
                          std::to_string(k_max) + "] leaves [1, " +
                          (keep_ratio ? std::string("1000] (keep ratios in ‰ of each image's N_v)")
                                      : "N_v = " + std::to_string(param_max) + "]"));
}

const JsonFields<MinKSearchOptions>& min_k_search_fields() {
  using S = MinKSearchOptions;
  static const JsonFields<S> fields("optimize options",
                                    {{"k_min", &S::k_min}, {"k_max", &S::k_max}, {"k_step", &S::k_step}});
  return fields;
}

namespace {

SearchOutcome search_min_k(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) {
  const ModelShape& shape = ev.shape();
  const PlanTemplate t = PlanTemplate::parse(o.templates.at(0), shape);
  if (t.param() == TemplateParam::kPdropRatio)
    throw InvalidArgument("optimize --method min-k: template '" + t.text() +
                          "' has no K or keep ratio to search");
  const bool ratio = t.param() == TemplateParam::kKeepPercent;
  // "K=64" or "keep 25.0%": how a searched value reads in the log, the chosen reason and the notes.
  const auto at_text = [&](int64_t k) { return ratio ? "keep " + t.param_text(k) : "K=" + t.param_text(k); };
  const MinKOptions mk = o.min_k_options(t.param_max());
  SearchOutcome out;
  emit(log, "min-k " + t.text() + ": unpruned reference on calibration");
  out.points.push_back(ev.evaluate(PruningPlan{}, Split::kCalib));
  const double reference = out.points[0].accuracy;

  std::map<int64_t, size_t> at_k;      // K → index into out.points
  std::map<int64_t, double> compared;  // K → the accuracy compared with the threshold (bound-adjusted)
  const auto measure = [&](int64_t k) {
    if (auto it = compared.find(k); it != compared.end()) return it->second;
    out.points.push_back(ev.evaluate(t.at(k), Split::kCalib, t.text(), k));
    at_k[k] = out.points.size() - 1;
    const PlanCheck& c = check_point(o, out, at_k[k]);
    return compared[k] = accuracy_for_epsilon(c, out.points[0], out.points.back());
  };
  // Per-family limits join "within ε"; the speed rule does not (it works the other way in K: see below).
  const auto families_within = [&](int64_t k) { return out.checks.at(at_k.at(k)).families_within; };

  // Known points: plans of this template whose calibration results are all in the store already.
  std::map<std::string, int64_t> k_of_plan;
  for (int64_t k = 1; k <= t.param_max(); ++k)
    if (t.valid_at(k))
      k_of_plan.emplace(ev.result_key(t.at(k)), k);  // several ‰ may make one plan: the first
  std::map<int64_t, double> known;
  for (const std::string& plan : ev.complete_plans(Split::kCalib))
    if (auto it = k_of_plan.find(plan); it != k_of_plan.end()) known[it->second] = 0.0;
  if (!known.empty())
    emit(log, "min-k: " + std::to_string(known.size()) + " known points of this template in the store");
  for (auto& [k, a] : known) a = measure(k);

  const auto probe = [&](int64_t k) {
    emit(log, "min-k " + t.text() + ": probe " + at_text(k));
    return measure(k);
  };
  const MinKResult r = min_k_search(probe, reference, mk, known, families_within);
  out.details = r.to_json();
  out.details["template"] = t.text();
  out.details["param"] = t.param_name();  // "K" or "keep ratio" (probes' "keep" is then in ‰)
  if (ratio)
    for (size_t i = 0; i < r.violations.size(); ++i)
      out.details["violations"][i]["text"] = r.violations[i].describe(at_text);
  out.details["options"] = to_json(mk);
  out.details["n_candidates"] = mk.candidates().size();
  out.details["confidence"] = o.confidence;
  if (o.confidence > 0)
    out.details["confidence_rule"] = "probe accuracies are unpruned accuracy − the upper " +
                                     std::to_string(o.confidence) + " confidence bound on the paired loss";
  out.details["constraints"] = constraint_rules(o.constraints());

  char buf[256];
  if (r.chosen) {
    out.chosen = at_k.at(*r.chosen);
    std::snprintf(buf, sizeof buf,
                  "%s is the search's answer: calibration accuracy %.4f%s ≥ threshold %.4f (unpruned %.4f, "
                  "ε=%g %s)",
                  at_text(*r.chosen).c_str(), compared.at(*r.chosen),
                  o.confidence > 0 ? " (unpruned − loss bound)" : "", r.threshold, reference, o.epsilon,
                  o.epsilon_absolute ? "absolute" : "relative");
  } else {
    std::snprintf(buf, sizeof buf,
                  "no %s ≤ %s is within ε: accuracy at %s is %.4f < threshold %.4f (unpruned %.4f)",
                  ratio ? "keep ratio" : "K", t.param_text(mk.k_max).c_str(), at_text(mk.k_max).c_str(),
                  r.probes.at(0).accuracy, r.threshold, reference);
  }
  out.chosen_reason = buf;
  // K = N_v (keep ratio 100 %) prunes nothing: when it is the answer, no pruning plan of the template meets
  // ε, whatever its measured time (a no-op plan's speedup is timing noise around 1).
  if (r.chosen && *r.chosen == t.param_max()) {
    out.chosen_reason = at_text(*r.chosen) + " keeps every visual token; every smaller " +
                        (ratio ? "keep ratio" : "K") + " probed misses ε, so no pruning plan of " + t.text() +
                        " is chosen: keep the unpruned model";
    out.chosen.reset();
  }
  // Never slower than unpruned: the search's answer is the smallest K within ε, and prefill time grows with
  // K, so when the answer is not faster no candidate meets both (under monotonicity): nothing is chosen.
  if (out.chosen) {
    const PlanCheck& c = out.checks.at(*out.chosen);
    if (!c.faster) {
      out.chosen_reason = at_text(*r.chosen) + " meets ε but " + c.rejection() + "; every smaller " +
                          (ratio ? "keep ratio" : "K") + " probed misses ε, so keep the unpruned model";
      out.chosen.reset();
    } else if (!c.worst_family.empty()) {
      const FamilyCheck& w = c.families.at(c.worst_family);
      std::snprintf(buf, sizeof buf, "; closest family %s: %s %.4f ≤ E limit %.4f", c.worst_family.c_str(),
                    w.bound ? "loss bound" : "loss", w.compared, w.limit);
      out.chosen_reason += buf;
    }
  }
  for (const auto& v : r.violations) out.notes.push_back("non-monotone: " + v.describe(at_text));
  if (r.chosen && r.smallest_within_seen && *r.smallest_within_seen < *r.chosen)
    out.notes.push_back(at_text(*r.smallest_within_seen) + " (a " +
                        (at_k.count(*r.smallest_within_seen) ? "probed" : "known") +
                        " point) is also within ε, below the chosen " + at_text(*r.chosen) +
                        ": being within ε is not monotone in " + t.param_name() + " here; the chosen " +
                        t.param_name() + " follows the search rule");
  add_check_notes(out, o.timing_factor);  // after the search's own notes
  set_frontier(out);
  return out;
}

// A searched value as the report prints it: "64" (K) or "25.0%" (a keep ratio in ‰).
std::string value_text(int64_t v, bool ratio) {
  return ratio ? std::to_string(v / 10) + "." + std::to_string(v % 10) + "%" : std::to_string(v);
}

std::string min_k_section(const nlohmann::json& d) {
  const bool ratio = d.value("param", "K") == "keep ratio";
  const std::string name = ratio ? "keep ratio" : "K";
  const auto value = [&](const nlohmann::json& v) { return value_text(v.get<int64_t>(), ratio); };
  std::string md = "## min-K search\n\n";
  md += "Template `" + d.value("template", "") + "`, " + std::to_string(d.value("n_candidates", 0)) +
        " candidate " + (ratio ? "keep ratios of each image's own N_v" : "K values") + " (k_min " +
        value(d["options"]["k_min"]) + ", k_max " + value(d["options"]["k_max"]) + ", step " +
        value(d["options"]["k_step"]) + "); threshold accuracy " +
        format_number("%.4f", d.value("threshold", 0.0)) + ".\n\n";
  md += "**Rule.** " + d.value("rule", "") +
        (ratio ? " (Here K is the keep ratio, in ‰ of each image's N_v.)" : "") + "\n\n";
  md += "| probe | " + name + " | accuracy | within ε |\n|---:|---:|---:|:---:|\n";
  for (const auto& p : d["probes"])
    md += "| " + std::to_string(p["order"].get<int>() + 1) + " | " + value(p["keep"]) + " | " +
          format_number("%.4f", p["accuracy"].get<double>()) + " | " +
          (p["within_epsilon"].get<bool>() ? "yes" : "no") + " |\n";
  if (!d["known"].empty()) {
    md += "\nKnown points (complete in the result store, not probed): ";
    std::string list;
    for (const auto& p : d["known"])
      list += std::string(list.empty() ? "" : ", ") + (ratio ? "keep " : "K=") + value(p["keep"]) + " " +
              format_number("%.4f", p["accuracy"].get<double>()) +
              (p["within_epsilon"].get<bool>() ? " (within)" : "");
    md += list + ".\n";
  }
  md += "\n";
  if (d["violations"].empty()) {
    md += "Monotonicity: no violation among the " + std::to_string(d["probes"].size() + d["known"].size()) +
          " points seen (accuracy never falls as " + name + " grows).\n\n";
  } else {
    md += "Monotonicity violations (accuracy falls as " + name + " grows, adjacent points in " + name +
          "):\n\n";
    for (const auto& v : d["violations"]) md += "- " + v["text"].get<std::string>() + "\n";
    md += "\n";
  }
  return md;
}

class MinKSearch final : public PlanSearch {
 public:
  void add_flags(SearchFlags& flags, OptimizeOptions& o) const override {
    flags.option("--k-min", &o.k_min, "min-k: smallest K searched (keep-ratio templates: in ‰, 1–1000)")
        ->capture_default_str();
    flags
        .option("--k-max", &o.k_max, "min-k: largest K searched (0 = N_v; keep-ratio templates: ‰, 0 = 1000)")
        ->capture_default_str();
    flags
        .option("--k-step", &o.k_step,
                "min-k: K searched on k_min, k_min + step, …, and k_max (keep-ratio templates: in ‰)")
        ->capture_default_str();
  }
  void validate(const OptimizeOptions& o) const override {
    if (o.templates.size() != 1)
      throw InvalidArgument("optimize --method min-k searches one template, got " +
                            std::to_string(o.templates.size()));
  }
  void validate(const OptimizeOptions& o, const std::vector<PlanTemplate>& templates,
                int64_t) const override {
    const PlanTemplate& t = templates.at(0);
    for (const int64_t k : o.min_k_options(t.param_max()).candidates()) {
      std::string why;
      if (!t.valid_at(k, &why))
        throw InvalidArgument("optimize --method min-k: template '" + t.text() + "' rejects " +
                              (t.param() == TemplateParam::kKeepPercent ? "keep ratio " : "K=") +
                              t.param_text(k) + " (" + why + "); min-k needs every " + t.param_name() +
                              " of the searched range");
    }
  }
  SearchOutcome run(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) const override {
    return search_min_k(o, ev, log);
  }
  std::string constraint_text(const OptimizeOptions& o) const override {
    return "accuracy loss within " + epsilon_text(o);
  }
  std::string report_section(const nlohmann::json& details) const override { return min_k_section(details); }
};

}  // namespace

const PlanSearch& min_k_search() {
  static const MinKSearch search;
  return search;
}

}  // namespace vispco::optimize
