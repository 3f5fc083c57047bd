// OptimizeOptions and the optimize job (a plan search on calibration, then test); see optimize.h.
#include "optimize/optimize.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "optimize/confidence.h"
#include "optimize/pareto.h"
#include "optimize/plan_template.h"
#include "optimize/search_method.h"
#include "optimize/searches.h"

namespace vispco::optimize {

void OptimizeOptions::validate() const {
  const PlanSearch& search = find_plan_search(method);
  if (epsilon_absolute ? !(epsilon >= 0.0 && epsilon <= 1.0) : !(epsilon >= 0.0 && epsilon < 1.0))
    throw InvalidArgument(std::string("optimize: epsilon must be in ") +
                          (epsilon_absolute ? "[0, 1] (absolute accuracy loss, 0.01 = one point)"
                                            : "[0, 1) (relative accuracy loss, 0.01 = 1 %)") +
                          ", got " + std::to_string(epsilon));
  if (templates.empty())
    throw InvalidArgument("optimize --method " + method +
                          ": no plan template (give --scorer, e.g. fastv, or --template)");
  parse_keep_as(keep_as);
  GridSearchOptions::validate();
  MinKSearchOptions::validate();
  if (confidence != 0.0 && !(confidence >= 0.5 && confidence < 1.0))
    throw InvalidArgument("optimize: --confidence must be 0 (off) or in [0.5, 1), got " +
                          std::to_string(confidence));
  if (epsilon_per_family != 0.0 &&
      (epsilon_absolute ? !(epsilon_per_family > 0.0 && epsilon_per_family <= 1.0)
                        : !(epsilon_per_family > 0.0 && epsilon_per_family < 1.0)))
    throw InvalidArgument(std::string("optimize: --epsilon-per-family must be 0 (off) or in ") +
                          (epsilon_absolute ? "(0, 1]" : "(0, 1)") + ", got " +
                          std::to_string(epsilon_per_family));
  if (min_family_n < 1)
    throw InvalidArgument("optimize: --min-family-n must be ≥ 1, got " + std::to_string(min_family_n));
  if (min_speedup != 0.0 && !(min_speedup >= 1.0))
    throw InvalidArgument("optimize: --min-speedup must be 0 (off) or ≥ 1, got " +
                          std::to_string(min_speedup));
  if (!(timing_factor > 1.0))
    throw InvalidArgument("optimize: the timing factor must be > 1, got " + std::to_string(timing_factor));
  search.validate(*this);
}

ConstraintOptions OptimizeOptions::constraints() const {
  ConstraintOptions c;
  c.epsilon = epsilon;
  c.absolute = epsilon_absolute;
  c.confidence = confidence;
  c.epsilon_per_family = epsilon_per_family;
  c.min_family_n = static_cast<size_t>(std::max<int64_t>(1, min_family_n));
  c.min_speedup = min_speedup;
  c.timing_factor = timing_factor;
  return c;
}

void OptimizeOptions::validate(const ModelShape& shape) const {
  validate();
  const int64_t n_v = shape.n_visual_tokens;
  GridSearchOptions::validate(n_v);
  const PlanSearch& search = find_plan_search(method);
  OptimizeOptions resolved = *this;
  resolved.templates = resolved_templates(shape);
  std::vector<PlanTemplate> parsed;
  for (const auto& t : resolved.templates) {
    parsed.push_back(PlanTemplate::parse(t, shape));
    if (!search.takes_ratio_templates() && parsed.back().param() == TemplateParam::kPdropRatio)
      throw InvalidArgument(
          "optimize --method " + method + ": template '" + t +
          "' has no K or keep ratio to vary (PyramidDrop ratio templates work with --method "
          "budget)");
  }
  const bool ratio = !parsed.empty() && parsed[0].param() == TemplateParam::kKeepPercent;
  MinKSearchOptions::validate(ratio ? parsed[0].param_max() : n_v, ratio);
  search.validate(resolved, parsed, n_v);
}

std::vector<std::string> OptimizeOptions::resolved_templates(const ModelShape& shape) const {
  const KeepAs k = parse_keep_as(keep_as);
  std::vector<std::string> out;
  for (const auto& t : templates) out.push_back(apply_keep_as(t, k, shape));
  return out;
}

MinKOptions OptimizeOptions::min_k_options(int64_t param_max) const {
  MinKOptions m;
  m.epsilon = epsilon;
  m.absolute = epsilon_absolute;
  m.k_min = k_min;
  m.k_max = k_max == 0 ? param_max : k_max;
  m.k_step = k_step;
  return m;
}

// The shared keys, then each section's (search_min_k.h, search_budget.h, search_grid.h).
static const JsonFields<OptimizeOptions>& optimize_fields() {
  using O = OptimizeOptions;
  static const JsonFields<OptimizeOptions> fields("optimize options", [] {
    // A table, several fields a line:
    // clang-format off
    std::vector<JsonField<O>> f = {
        {"method", &O::method}, {"templates", &O::templates}, {"keep_as", &O::keep_as}, {"epsilon", &O::epsilon},
        {"epsilon_absolute", &O::epsilon_absolute}, {"evaluate_test", &O::evaluate_test},
        {"confidence", &O::confidence}, {"epsilon_per_family", &O::epsilon_per_family},
        {"min_family_n", &O::min_family_n}, {"min_speedup", &O::min_speedup},
        {"timing_factor", &O::timing_factor}};
    // clang-format on
    for (auto&& section : {min_k_search_fields().fields_of<O>(), budget_search_fields().fields_of<O>(),
                           grid_search_fields().fields_of<O>()})
      f.insert(f.end(), section.begin(), section.end());
    return f;
  }());
  return fields;
}

nlohmann::json to_json(const OptimizeOptions& o) { return optimize_fields().write(o); }

OptimizeOptions optimize_options_from_json(const nlohmann::json& j) {
  return optimize_fields().read_valid(j);
}

void set_frontier(SearchOutcome& out) {
  std::vector<ParetoPoint> pts;
  for (const auto& p : out.points) pts.push_back({p.flops.llm, p.accuracy});
  out.frontier = pareto_frontier(pts);
}

double accuracy_threshold(const OptimizeOptions& o, double reference) {
  return o.epsilon_absolute ? reference - o.epsilon : reference * (1.0 - o.epsilon);
}

const PlanCheck& check_point(const OptimizeOptions& o, SearchOutcome& out, size_t i) {
  PlanCheck c = check_plan(o.constraints(), out.points.at(0), out.points.at(i));
  out.points[i].loss_bound = c.bound;
  return out.checks[i] = std::move(c);
}

double accuracy_for_epsilon(const PlanCheck& c, const EvalPoint& reference, const EvalPoint& point) {
  return c.unpruned || !c.bound ? point.accuracy : reference.accuracy - c.compared;
}

void add_check_notes(SearchOutcome& out, double timing_factor) {
  char buf[256];
  std::set<std::string> too_few;
  for (const auto& [i, c] : out.checks) {
    if (c.unpruned) continue;
    const EvalPoint& p = out.points.at(i);
    if (c.within_epsilon && c.families_within && !c.faster)
      out.notes.push_back("dropped for speed: `" + p.plan + "` meets ε but " + c.rejection());
    if (c.within_epsilon && !c.families_within)
      out.notes.push_back("rejected by a family: `" + p.plan + "` meets the overall ε but " + c.rejection());
    if (c.timing_disagrees) {
      std::snprintf(
          buf, sizeof buf,
          "timing vs FLOPs model: `%s` measured prefill speedup %.2f× vs FLOPs-model %.2f× (more than "
          "%.1f× apart)",
          p.plan.c_str(), c.measured_speedup, c.flops_speedup, timing_factor);
      out.notes.push_back(buf);
    }
    too_few.insert(c.too_few.begin(), c.too_few.end());
  }
  for (const auto& f : too_few)
    out.notes.push_back("family " + f +
                        " has too few calibration samples for the per-family rule: not checked");
}

void emit(const OptimizeLog& log, const std::string& line) {
  if (log) log(line);
}

TestComparison compare_on_test(const EvalPoint& reference, const EvalPoint& chosen,
                               const ConstraintOptions& limits) {
  TestComparison t;
  t.reference = reference;
  t.chosen = chosen;
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : std::nan(""); };  // undefined at b = 0
  const auto limit = [&](double e, double ref) { return limits.absolute ? e : e * ref; };
  const bool paired = !chosen.scores.empty() && chosen.scores.size() == reference.scores.size() &&
                      chosen.families == reference.families && chosen.families.size() == chosen.scores.size();
  constexpr double kLevel = 0.95;
  t.retention = ratio(chosen.accuracy, reference.accuracy);
  t.prefill_speedup = ratio(reference.mean_prefill_ms, chosen.mean_prefill_ms);
  t.loss_limit = limit(limits.epsilon, reference.accuracy);
  if (paired) t.loss_interval = paired_loss_interval(reference.scores, chosen.scores, kLevel);
  double worst = INFINITY;
  for (const auto& [name, c] : chosen.per_family) {
    const auto it = reference.per_family.find(name);
    if (it == reference.per_family.end()) continue;
    TestComparison::Family f;
    f.retention = ratio(c.accuracy, it->second.accuracy);
    f.flops_ratio = c.flops_ratio;
    f.prefill_speedup = ratio(it->second.mean_prefill_ms, c.mean_prefill_ms);
    f.loss = it->second.accuracy - c.accuracy;
    f.limit = limit(limits.epsilon_per_family, it->second.accuracy);
    if (paired) {
      std::vector<double> r, p;
      for (size_t i = 0; i < chosen.scores.size(); ++i)
        if (chosen.families[i] == name) r.push_back(reference.scores[i]), p.push_back(chosen.scores[i]);
      if (!r.empty()) f.loss_interval = paired_loss_interval(r, p, kLevel);
    }
    if (!std::isnan(f.retention) && f.retention < worst) {
      worst = f.retention;
      t.worst_family = name;
    }
    t.per_family[name] = f;
  }
  return t;
}

nlohmann::json TestComparison::to_json() const {
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, f] : per_family) {
    fam[name] = {{"retention", f.retention},
                 {"flops_ratio", f.flops_ratio},
                 {"prefill_speedup", f.prefill_speedup},
                 {"loss", f.loss},
                 {"limit", f.limit}};
    if (f.loss_interval) fam[name]["loss_interval"] = f.loss_interval->to_json();
  }
  nlohmann::json j = {{"reference", reference.to_json()},
                      {"chosen", chosen.to_json()},
                      {"retention", retention},
                      {"flops_ratio", chosen.flops.llm},
                      {"flops_ratio_with_vision", chosen.flops.with_vision},
                      {"flops_speedup", chosen.flops.llm > 0 ? 1.0 / chosen.flops.llm : 0.0},
                      {"prefill_speedup", prefill_speedup},
                      {"loss", reference.accuracy - chosen.accuracy},
                      {"loss_limit", loss_limit},
                      {"worst_family", worst_family},
                      {"per_family", fam}};
  if (loss_interval) j["loss_interval"] = loss_interval->to_json();
  return j;
}

namespace {

// FLOPs-model curves of the K and keep-ratio templates seen in the search, at the calibration prompts (a
// keep ratio costed at the nominal N_v).
std::vector<FlopsCurve> flops_curves(const SearchOutcome& s, PlanEvaluator& ev) {
  const ModelShape& shape = ev.shape();
  std::vector<FlopsCurve> out;
  std::vector<std::string> seen;
  for (const auto& p : s.points) {
    if (p.template_text.empty() || p.template_text == "none" ||
        std::find(seen.begin(), seen.end(), p.template_text) != seen.end())
      continue;
    seen.push_back(p.template_text);
    const PlanTemplate t = PlanTemplate::parse(p.template_text, shape);
    if (t.param() == TemplateParam::kPdropRatio) continue;
    const int64_t top = t.param_max();
    FlopsCurve c{p.template_text, {}};
    std::set<int64_t> ks{top};
    for (int64_t k = 1; k <= top; k += std::max<int64_t>(1, top / 96)) ks.insert(k);
    for (const auto& q : s.points)
      if (q.template_text == p.template_text) ks.insert(q.param);
    for (const int64_t k : ks)
      if (t.valid_at(k))
        c.points.emplace_back(
            k, plan_flops_ratio(t.at(k), shape, ev.text_lengths(Split::kCalib), ev.image_flops(Split::kCalib))
                   .llm);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

OptimizeReport run_optimize(const OptimizeOptions& given, PlanEvaluator& ev, const OptimizeLog& log) {
  const ModelShape& shape = ev.shape();
  given.validate(shape);
  OptimizeOptions options = given;  // the templates as the search varies them (keep_as applied)
  options.templates = given.resolved_templates(shape);
  Stopwatch wall;
  OptimizeReport r;
  r.options = options;
  r.n_visual = shape.n_visual_tokens;
  r.search = find_plan_search(options.method).run(options, ev, log);
  const auto count = [&](const EvalPoint& p) {
    r.n_evaluated += p.n_evaluated;
    r.n_from_store += p.n_from_store;
  };
  for (const auto& p : r.search.points) count(p);
  if (r.search.chosen && options.evaluate_test) {
    const EvalPoint& c = r.search.points.at(*r.search.chosen);
    emit(log, "test: the unpruned model and the chosen plan " + c.plan);
    const EvalPoint ref = ev.evaluate(PruningPlan{}, Split::kTest);
    const EvalPoint chosen = c.plan == "none" ? ref
                                              : ev.evaluate(parse_plan(c.plan, r.n_visual), Split::kTest,
                                                            c.template_text, c.param);
    count(ref);
    if (c.plan != "none") count(chosen);
    r.test = compare_on_test(ref, chosen, options.constraints());
  }
  r.flops_curves = flops_curves(r.search, ev);
  r.wall_s = wall.ms() / 1000.0;
  return r;
}

}  // namespace vispco::optimize
