// A plan against the overall ε, the per-family E and the speed rule (see plan_check.h).
#include "optimize/plan_check.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco::optimize {
namespace {

constexpr double kTol = 1e-12;  // as min_k.cpp: accuracies are ratios of small integers

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double allowed(double e, bool absolute, double reference_accuracy) {
  return absolute ? e : e * reference_accuracy;
}

// The scores of the samples of one family, in sample order.
std::vector<double> family_scores(const EvalPoint& p, const std::string& family) {
  std::vector<double> out;
  for (size_t i = 0; i < p.scores.size(); ++i)
    if (p.families[i] == family) out.push_back(p.scores[i]);
  return out;
}

}  // namespace

std::string PlanCheck::rejection() const {
  std::string s;
  const auto add = [&](const std::string& c) { s += (s.empty() ? "" : "; ") + c; };
  if (!within_epsilon)
    add(std::string(bound ? "loss bound " : "loss ") + fmt("%.4f", compared) + " > ε limit " +
        fmt("%.4f", limit));
  if (!families_within)
    for (const auto& [name, f] : families)
      if (f.checked && !f.within)
        add("family " + name + (f.bound ? " loss bound " : " loss ") + fmt("%.4f", f.compared) +
            " > E limit " + fmt("%.4f", f.limit));
  if (!faster)
    add(std::isnan(measured_speedup)
            ? std::string("prefill not measured")
            : "measured prefill " + fmt("%.2f", measured_speedup) + "× (not faster than unpruned)");
  return s;
}

nlohmann::json PlanCheck::to_json() const {
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, f] : families) {
    fam[name] = {{"n", f.n},
                 {"reference_accuracy", f.reference_accuracy},
                 {"accuracy", f.accuracy},
                 {"loss", f.loss},
                 {"compared", f.compared},
                 {"limit", f.limit},
                 {"checked", f.checked},
                 {"within", f.within}};
    if (f.bound) fam[name]["loss_bound"] = f.bound->to_json();
  }
  nlohmann::json j = {{"unpruned", unpruned},
                      {"acceptable", acceptable()},
                      {"within_epsilon", within_epsilon},
                      {"loss", loss},
                      {"compared", compared},
                      {"limit", limit},
                      {"families", fam},
                      {"family_confidence", family_confidence},
                      {"families_within", families_within},
                      {"worst_family", worst_family},
                      {"too_few", too_few},
                      {"measured_speedup", measured_speedup},
                      {"flops_speedup", flops_speedup},
                      {"faster", faster},
                      {"timing_disagrees", timing_disagrees},
                      {"rejection", rejection()}};
  if (bound) j["loss_bound"] = bound->to_json();
  return j;
}

PlanCheck check_plan(const ConstraintOptions& o, const EvalPoint& reference, const EvalPoint& plan) {
  PlanCheck c;
  c.unpruned = plan.plan == "none";
  const bool bounded = o.confidence > 0;
  if (bounded && (plan.scores.size() != reference.scores.size() || plan.scores.empty() ||
                  plan.families.size() != plan.scores.size() || reference.families != plan.families))
    throw InvalidArgument("optimize --confidence: per-sample scores and families are missing or differ for " +
                          plan.plan + " (" + std::to_string(plan.scores.size()) + " scores vs " +
                          std::to_string(reference.scores.size()) + " unpruned)");
  // Overall.
  c.loss = reference.accuracy - plan.accuracy;
  c.limit = allowed(o.epsilon, o.absolute, reference.accuracy);
  c.compared = c.loss;
  if (bounded && !c.unpruned) {
    c.bound = paired_loss_bound(reference.scores, plan.scores, o.confidence);
    c.compared = c.bound->upper;
  }
  c.within_epsilon = c.unpruned || c.compared <= c.limit + kTol;

  // Per family.
  size_t n_checked = 0;
  const bool family_rule = o.epsilon_per_family > 0;
  for (const auto& [name, pf] : plan.per_family) {
    const auto it = reference.per_family.find(name);
    if (it == reference.per_family.end()) continue;
    FamilyCheck f;
    f.n = pf.n;
    f.reference_accuracy = it->second.accuracy;
    f.accuracy = pf.accuracy;
    f.loss = f.reference_accuracy - f.accuracy;
    f.compared = f.loss;
    f.limit = allowed(o.epsilon_per_family, o.absolute, f.reference_accuracy);
    f.checked = family_rule && !c.unpruned && f.n >= o.min_family_n;
    if (family_rule && f.n < o.min_family_n) c.too_few.push_back(name);
    n_checked += f.checked;
    c.families[name] = f;
  }
  if (bounded && n_checked > 0)
    c.family_confidence = 1.0 - (1.0 - o.confidence) / static_cast<double>(n_checked);
  double worst = -INFINITY;
  for (auto& [name, f] : c.families) {
    if (!f.checked) continue;
    if (bounded) {
      f.bound =
          paired_loss_bound(family_scores(reference, name), family_scores(plan, name), c.family_confidence);
      f.compared = f.bound->upper;
    }
    f.within = f.compared <= f.limit + kTol;
    c.families_within = c.families_within && f.within;
    if (f.compared - f.limit > worst) {
      worst = f.compared - f.limit;
      c.worst_family = name;
    }
  }

  // Speed.
  c.flops_speedup = plan.flops.llm > 0 ? 1.0 / plan.flops.llm : std::nan("");
  c.measured_speedup = reference.mean_prefill_ms > 0 && plan.mean_prefill_ms > 0
                           ? reference.mean_prefill_ms / plan.mean_prefill_ms
                           : std::nan("");
  if (c.unpruned) {
    c.measured_speedup = 1.0;
    return c;
  }
  c.faster = o.min_speedup <= 0 || (!std::isnan(c.measured_speedup) && c.measured_speedup > o.min_speedup);
  if (!std::isnan(c.measured_speedup) && !std::isnan(c.flops_speedup)) {
    const double r = c.flops_speedup / c.measured_speedup;
    c.timing_disagrees = r > o.timing_factor || r < 1.0 / o.timing_factor;
  }
  return c;
}

std::string constraint_rules(const ConstraintOptions& o) {
  const auto eps = [&](double e) {
    return o.absolute ? fmt("%.1f", 100 * e) + " points"
                      : fmt("%.1f", 100 * e) + " % of the unpruned accuracy";
  };
  std::string s =
      "A pruned plan is acceptable when (1) its accuracy loss against the unpruned model on the "
      "calibration split is within ε = " +
      eps(o.epsilon);
  if (o.confidence > 0)
    s += " by its upper " + fmt("%.2f", o.confidence) +
         " confidence bound (paired over the same samples: Clopper–Pearson on the samples lost and gained)";
  else
    s += " (point estimate)";
  if (o.epsilon_per_family > 0) {
    s += "; (2) every question family with at least " + std::to_string(o.min_family_n) +
         " samples keeps its loss within E = " + eps(o.epsilon_per_family) +
         " of that family's unpruned accuracy";
    if (o.confidence > 0)
      s += " by the same kind of bound, each at 1 − " + fmt("%.2f", 1 - o.confidence) +
           "/F for F such families (Bonferroni: all hold together at " + fmt("%.2f", o.confidence) + ")";
    s += "; families with fewer samples are named, not checked";
  } else {
    s += "; (2) no per-family constraint (--epsilon-per-family 0)";
  }
  if (o.min_speedup > 0)
    s += "; (3) its measured decoder prefill on the calibration split is faster than unpruned (speedup > " +
         fmt("%.2f", o.min_speedup) + "×)";
  else
    s += "; (3) no speed constraint (--min-speedup 0)";
  s += ". Measured and FLOPs-model speedups differing by more than " + fmt("%.1f", o.timing_factor) +
       "× are flagged.";
  return s;
}

}  // namespace vispco::optimize
