// grid: every (template, K) plan evaluated on calibration, the empirical Pareto frontier of accuracy vs LLM
// FLOPs ratio (pareto.h), and as the chosen plan the cheapest frontier plan whose accuracy is within ε of the
// unpruned model. Also ranks the pre-LLM templates (for "min-k on the best pre-LLM scorer"). Its registry
// row: settings (search_grid.h), flags, templates, validation, search and report section.
#include "optimize/search_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "core/errors.h"
#include "core/named_table.h"
#include "model/family.h"
#include "optimize/job_flags.h"
#include "optimize/search_flags.h"
#include "optimize/searches.h"
#include "prune/scorer.h"

namespace vispco::optimize {

void GridSearchOptions::validate() const {
  for (const int64_t k : keeps)
    if (k < 1) throw InvalidArgument("optimize: K must be ≥ 1, got " + std::to_string(k));
  for (const int64_t p : keep_ratios)
    if (p < 1 || p > 1000)
      throw InvalidArgument("optimize: a keep ratio must be in [1, 1000] ‰ (0.1% to 100%), got " +
                            std::to_string(p) + " ‰");
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> parse_grid_keeps(const std::string& text) {
  std::vector<int64_t> counts, ratios;
  std::string piece;
  for (size_t b = 0; b <= text.size();) {
    const size_t e = std::min(text.find(',', b), text.size());
    piece = text.substr(b, e - b);
    b = e + 1;
    if (piece.empty()) throw InvalidArgument("optimize: --keep has an empty entry in '" + text + "'");
    if (piece.back() != '%') {
      counts.push_back(parse_int_list(piece, "--keep").at(0));
      continue;
    }
    // "12.5%" → 125 ‰: one decimal at most, so that the ratio is a whole number of ‰.
    const std::string number = piece.substr(0, piece.size() - 1);
    const size_t dot = number.find('.');
    const std::string whole = number.substr(0, dot),
                      frac = dot == std::string::npos ? "" : number.substr(dot + 1);
    const auto digits = [](const std::string& s) {
      return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (whole.empty() || !digits(whole) || !digits(frac) || frac.size() > 1 || whole.size() > 4 ||
        (dot != std::string::npos && frac.empty()))
      throw InvalidArgument("optimize: --keep entry '" + piece +
                            "' is not a count or a share with at most one decimal (e.g. 12.5%)");
    ratios.push_back(std::stoll(whole) * 10 + (frac.empty() ? 0 : frac[0] - '0'));
  }
  return {counts, ratios};
}

void GridSearchOptions::validate(int64_t n_visual) const {
  for (const int64_t k : keeps)
    if (k > n_visual)
      throw InvalidArgument("optimize: K " + std::to_string(k) +
                            " is outside [1, N_v = " + std::to_string(n_visual) + "]");
}

const JsonFields<GridSearchOptions>& grid_search_fields() {
  static const JsonFields<GridSearchOptions> fields(
      "optimize options",
      {{"keeps", &GridSearchOptions::keeps}, {"keep_ratios", &GridSearchOptions::keep_ratios}});
  return fields;
}

namespace {

// Among pre-LLM templates that take every K in [1, N_v] (so min-k can search them), the one with the highest
// mean calibration accuracy over the K values all of them were evaluated at. Empty when there is none.
nlohmann::json rank_pre_llm(const SearchOutcome& out, const std::vector<PlanTemplate>& templates) {
  std::vector<const PlanTemplate*> cands;
  for (const auto& t : templates) {
    if (!t.pre_llm()) continue;
    bool every_k = true;
    for (int64_t k = 1; k <= t.param_max() && every_k; ++k) every_k = t.valid_at(k);
    if (every_k) cands.push_back(&t);
  }
  nlohmann::json j = {{"rule",
                       "pre-LLM templates that take every K in [1, N_v] (or every keep ratio), ranked by "
                       "mean calibration accuracy over the values all of them were evaluated at (ties: given "
                       "order; K and keep-ratio templates share no values)"},
                      {"best", nullptr},
                      {"ranking", nlohmann::json::array()}};
  if (cands.empty()) return j;
  std::map<std::string, std::map<int64_t, double>> acc;  // template → K → accuracy
  for (const auto& p : out.points) acc[p.template_text][p.param] = p.accuracy;
  std::set<int64_t> shared;
  for (const auto& [k, a] : acc[cands[0]->text()]) shared.insert(k);
  for (const auto* t : cands) {
    std::set<int64_t> next;
    for (const auto k : shared)
      if (acc[t->text()].count(k)) next.insert(k);
    shared = next;
  }
  if (shared.empty()) return j;
  std::vector<std::pair<double, const PlanTemplate*>> scored;
  for (const auto* t : cands) {
    double sum = 0;
    for (const auto k : shared) sum += acc[t->text()][k];
    scored.emplace_back(sum / static_cast<double>(shared.size()), t);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [m, t] : scored) j["ranking"].push_back({{"template", t->text()}, {"mean_accuracy", m}});
  j["shared_keeps"] = shared;
  j["best"] = scored[0].second->text();
  return j;
}

SearchOutcome search_grid(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) {
  const ModelShape& shape = ev.shape();
  std::vector<PlanTemplate> templates;
  for (const auto& text : o.templates) templates.push_back(PlanTemplate::parse(text, shape));
  // The plan list first, so the log can count.
  std::vector<std::pair<const PlanTemplate*, int64_t>> plans;
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& t : templates)
    for (const int64_t k : t.param() == TemplateParam::kKeepPercent ? o.keep_ratios : o.keeps) {
      std::string why;
      if (t.valid_at(k, &why))
        plans.emplace_back(&t, k);
      else
        skipped.push_back({{"template", t.text()},
                           {"keep", k},
                           {"keep_text", t.param_name() + " " + t.param_text(k)},
                           {"reason", why}});
    }
  SearchOutcome out;
  emit(log, "grid: unpruned reference on calibration, then " + std::to_string(plans.size()) + " plans");
  out.points.push_back(ev.evaluate(PruningPlan{}, Split::kCalib));
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& [t, k] = plans[i];
    emit(log,
         "grid " + std::to_string(i + 1) + "/" + std::to_string(plans.size()) + ": " + t->at(k).to_string());
    out.points.push_back(ev.evaluate(t->at(k), Split::kCalib, t->text(), k));
  }
  set_frontier(out);
  const double threshold = accuracy_threshold(o, out.points[0].accuracy);
  for (size_t i = 0; i < out.points.size(); ++i) check_point(o, out, i);
  // The cheapest plan (LLM FLOPs ratio; ties: the more accurate, then the earlier) that meets every
  // constraint. With the overall point-estimate ε alone this is the cheapest frontier plan within ε; with a
  // bound, per-family limits or the speed rule a plan off the 2-D frontier can be it.
  size_t best = 0;  // the unpruned point meets every constraint by definition
  for (size_t i = 1; i < out.points.size(); ++i) {
    if (!out.checks.at(i).acceptable()) continue;
    const EvalPoint &p = out.points[i], &b = out.points[best];
    if (p.flops.llm < b.flops.llm - 1e-12 ||
        (p.flops.llm <= b.flops.llm + 1e-12 && p.accuracy > b.accuracy + 1e-12))
      best = i;
  }
  out.chosen = best;
  const EvalPoint& c = out.points[best];
  const PlanCheck& cc = out.checks.at(best);
  const bool on_frontier = std::find(out.frontier.begin(), out.frontier.end(), best) != out.frontier.end();
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "cheapest plan meeting every constraint: accuracy %.4f%s ≥ threshold %.4f (unpruned %.4f) at FLOPs "
      "ratio %.4f%s",
      accuracy_for_epsilon(cc, out.points[0], c), cc.bound ? " (unpruned − loss bound)" : "", threshold,
      out.points[0].accuracy, c.flops.llm, on_frontier ? ", on the frontier" : ", off the 2-D frontier");
  out.chosen_reason = buf;
  if (!cc.unpruned && !cc.worst_family.empty()) {
    const FamilyCheck& w = cc.families.at(cc.worst_family);
    std::snprintf(buf, sizeof buf, "; closest family %s: %s %.4f ≤ E limit %.4f", cc.worst_family.c_str(),
                  w.bound ? "loss bound" : "loss", w.compared, w.limit);
    out.chosen_reason += buf;
  }
  if (!cc.unpruned && o.min_speedup > 0 && !std::isnan(cc.measured_speedup)) {
    std::snprintf(buf, sizeof buf, "; measured prefill speedup %.2f× > %.2f×", cc.measured_speedup,
                  o.min_speedup);
    out.chosen_reason += buf;
  }
  if (c.plan == "none") out.chosen_reason += "; no pruned plan of the grid meets every constraint";
  add_check_notes(out, o.timing_factor);
  for (const auto& s : skipped)
    out.notes.push_back("skipped " + s["template"].get<std::string>() + " at " +
                        s["keep_text"].get<std::string>() + ": " + s["reason"].get<std::string>());
  out.details = {{"threshold", threshold},
                 {"confidence", o.confidence},
                 {"n_plans", plans.size()},
                 {"skipped", skipped},
                 {"pre_llm", rank_pre_llm(out, templates)}};
  return out;
}

std::string grid_section(const nlohmann::json& d) {
  std::string md = "## Grid\n\n" + std::to_string(d.value("n_plans", 0)) + " plans evaluated, " +
                   std::to_string(d["skipped"].size()) +
                   " skipped (the scorer rejects that K, keep ratio or layer).\n\n";
  const auto& pre = d["pre_llm"];
  if (!pre["best"].is_null()) {
    md += "Best pre-LLM template: `" + pre["best"].get<std::string>() + "` (" +
          pre["rule"].get<std::string>() + "):";
    for (const auto& r : pre["ranking"])
      md += " `" + r["template"].get<std::string>() + "` " +
            format_number("%.4f", r["mean_accuracy"].get<double>()) + ";";
    md += "\n\n";
  }
  return md;
}

class GridSearch final : public PlanSearch {
 public:
  void add_flags(SearchFlags& flags, OptimizeOptions& o) const override {
    flags.option_parsed(
        "--keep",
        [&o](const std::string& text) {
          if (!text.empty()) std::tie(o.keeps, o.keep_ratios) = parse_grid_keeps(text);
        },
        "grid: comma-separated K values (e.g. 576,288,192,144,96,64,32,16) and/or keep ratios of each "
        "image's N_v for keep-ratio templates (e.g. 50%,25%,12.5%; one decimal at most)");
  }
  // --template as given, else every scorer of --scorers (default: --scorer, else all) at its default layer or
  // at each of --layers it can act at.
  std::vector<std::string> templates(const std::string&, const JobFlags& j) const override {
    std::vector<std::string> out = given_templates(j);
    if (!out.empty()) return out;
    std::vector<std::string> names = split_names(j.scorers.empty() ? j.scorer : j.scorers);
    if (names.empty()) {  // every scorer that applies to the model
      const ModelShape shape = load_model_shape(j.model);
      for (const auto& e : scorer_registry())
        if (e.make()->applies_to(shape)) names.push_back(e.name);
    }
    const std::vector<int64_t> layers =
        j.layers.empty() ? std::vector<int64_t>{} : parse_int_list(j.layers, "--layers");
    for (const auto& s : names) {
      const int64_t def = default_layer(s);  // also rejects unknown names
      if (layers.empty()) {
        out.push_back(s + ":layer=" + std::to_string(def));
        continue;
      }
      const HookPoint hp = make_scorer(s)->hook_point();
      for (const int64_t l : layers)  // only the layers where the scorer can act
        if ((hp == HookPoint::kPreLlm && l == 0) || (hp == HookPoint::kInLlm && l >= 1) ||
            hp == HookPoint::kAny)
          out.push_back(s + ":layer=" + std::to_string(l));
    }
    return out;
  }
  void validate(const OptimizeOptions& o) const override {
    if (o.keeps.empty() && o.keep_ratios.empty())
      throw InvalidArgument(
          "optimize --method grid needs K values or keep ratios (--keep 576,288,144,64,32 or --keep "
          "50%,25%,12.5%)");
  }
  void validate(const OptimizeOptions& o, const std::vector<PlanTemplate>& templates,
                int64_t) const override {
    for (const auto& t : templates) {
      const bool ratio = t.param() == TemplateParam::kKeepPercent;
      if (ratio && o.keep_ratios.empty())
        throw InvalidArgument("optimize --method grid: template '" + t.text() +
                              "' varies the keep ratio of each image's N_v (--keep-as ratio, the default for "
                              "models whose images make their own N_v): give ratios (--keep 50%,25%) or "
                              "--keep-as count");
      if (!ratio && o.keeps.empty())
        throw InvalidArgument("optimize --method grid: template '" + t.text() +
                              "' varies K: give counts (--keep 64,32)");
    }
  }
  SearchOutcome run(const OptimizeOptions& o, PlanEvaluator& ev, const OptimizeLog& log) const override {
    return search_grid(o, ev, log);
  }
  std::string constraint_text(const OptimizeOptions& o) const override {
    return "frontier; chosen: the cheapest plan with accuracy loss within " + epsilon_text(o);
  }
  std::string report_section(const nlohmann::json& details) const override { return grid_section(details); }
  std::string summary_templates(const OptimizeOptions&) const override { return ""; }  // often many
};

}  // namespace

const PlanSearch& grid_search() {
  static const GridSearch search;
  return search;
}

}  // namespace vispco::optimize
