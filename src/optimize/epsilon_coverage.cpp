// Violation rates of ε (and per-family E) over re-drawn calibration subsets (see epsilon_coverage.h).
#include "optimize/epsilon_coverage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/errors.h"
#include "optimize/confidence.h"
#include "optimize/plan_check.h"

namespace vispco::optimize {
namespace {

// The EvalPoint of rung r over the samples `idx` of `t`: per-sample scores and families, overall and
// per-family accuracy (all that check_plan() reads besides timings, which the rule here leaves out).
EvalPoint rung_point(const LadderTable& t, const std::vector<size_t>& idx, size_t r, bool unpruned) {
  EvalPoint p;
  p.plan = unpruned ? "none" : "K=" + std::to_string(t.ladder[r]);
  p.n = idx.size();
  std::map<std::string, std::pair<double, size_t>> fam;
  double sum = 0;
  for (const size_t i : idx) {
    const double s = t.score[i][r];
    p.scores.push_back(s);
    p.families.push_back(t.families[i]);
    sum += s;
    auto& [fs, fn] = fam[t.families[i]];
    fs += s;
    ++fn;
  }
  p.accuracy = sum / static_cast<double>(idx.size());
  for (const auto& [name, v] : fam) {
    p.per_family[name].n = v.second;
    p.per_family[name].accuracy = v.first / static_cast<double>(v.second);
  }
  return p;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

nlohmann::json CoverageResult::to_json() const {
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& r : rungs)
    rj.push_back({{"keep", r.keep},
                  {"test_loss", r.test_loss},
                  {"flops_ratio", r.flops_ratio},
                  {"test_violates", r.test_violates},
                  {"test_family_violates", r.test_family_violates},
                  {"test_worst_family", r.test_worst_family},
                  {"chosen_point", r.chosen_point},
                  {"chosen_bound", r.chosen_bound}});
  return {
      {"n_calib", options.n_calib},
      {"draws", options.draws},
      {"epsilon", options.epsilon},
      {"epsilon_absolute", options.absolute},
      {"confidence", options.confidence},
      {"epsilon_per_family", options.epsilon_per_family},
      {"min_family_n", options.min_family_n},
      {"with_replacement", options.with_replacement},
      {"violation_rate_point", violation_rate_point},
      {"violation_rate_bound", violation_rate_bound},
      {"family_violation_rate_point", family_violation_rate_point},
      {"family_violation_rate_bound", family_violation_rate_bound},
      {"mean_keep_point", mean_keep_point},
      {"mean_keep_bound", mean_keep_bound},
      {"mean_flops_point", mean_flops_point},
      {"mean_flops_bound", mean_flops_bound},
      {"rungs", rj},
      {"rule",
       "per draw: the smallest ladder K whose calibration loss is within ε (and, with a per-family E, every "
       "family of at least min_family_n samples within E) by point estimates, or by upper confidence bounds "
       "(families Bonferroni-joint; plan_check.h); violation: its test-split loss exceeds ε (overall) or E "
       "(in some family of at least min_family_n test samples)"}};
}

std::string CoverageResult::to_markdown() const {
  const bool fam = options.epsilon_per_family > 0;
  std::string md =
      "| rule | draws with test loss > ε | " + std::string(fam ? "with a family's test loss > E | " : "") +
      "mean chosen K | mean LLM FLOPs ratio |\n|---|---:|" + (fam ? "---:|" : "") + "---:|---:|\n";
  md += "| point estimate | " + fmt("%.1f %%", 100 * violation_rate_point) + " | " +
        (fam ? fmt("%.1f %%", 100 * family_violation_rate_point) + " | " : "") +
        fmt("%.1f", mean_keep_point) + " | " + fmt("%.3f", mean_flops_point) + " |\n";
  md += "| upper " + fmt("%.2f", options.confidence) + " bound | " +
        fmt("%.1f %%", 100 * violation_rate_bound) + " | " +
        (fam ? fmt("%.1f %%", 100 * family_violation_rate_bound) + " | " : "") +
        fmt("%.1f", mean_keep_bound) + " | " + fmt("%.3f", mean_flops_bound) + " |\n\n";
  md += "| K | LLM FLOPs ratio | test loss | > ε on test | " +
        std::string(fam ? "worst family on test | > E | " : "") +
        "chosen (point) | chosen (bound) |\n|---:|---:|---:|:---:|" + (fam ? "---|:---:|" : "") +
        "---:|---:|\n";
  for (const auto& r : rungs)
    md += "| " + std::to_string(r.keep) + " | " + fmt("%.3f", r.flops_ratio) + " | " +
          fmt("%.4f", r.test_loss) + " | " + (r.test_violates ? "yes" : "no") + " | " +
          (fam ? (r.test_worst_family.empty() ? "–" : r.test_worst_family) + " | " +
                     (r.test_family_violates ? "yes" : "no") + " | "
               : "") +
          std::to_string(r.chosen_point) + " | " + std::to_string(r.chosen_bound) + " |\n";
  return md + "\n";
}

CoverageResult epsilon_coverage(const LadderTable& pool, const LadderTable& test, const CoverageOptions& o) {
  pool.validate();
  test.validate();
  if (pool.ladder != test.ladder)
    throw InvalidArgument("epsilon coverage: the tables have different ladders");
  if (o.n_calib < 1 || (!o.with_replacement && o.n_calib > pool.n()) || o.draws < 1)
    throw InvalidArgument("epsilon coverage: need 1 ≤ n_calib ≤ pool size (" + std::to_string(pool.n()) +
                          ", or draws with replacement) and ≥ 1 draw");
  if (!(o.confidence > 0 && o.confidence < 1))
    throw InvalidArgument("epsilon coverage: confidence must be in (0, 1)");
  const size_t R = pool.rungs();
  ConstraintOptions point;
  point.epsilon = o.epsilon;
  point.absolute = o.absolute;
  point.epsilon_per_family = o.epsilon_per_family;
  point.min_family_n = o.min_family_n;
  point.min_speedup = 0;  // timings are not part of the experiment
  ConstraintOptions bound = point;
  bound.confidence = o.confidence;

  CoverageResult res;
  res.options = o;
  // The truth: every rung on the whole test split.
  std::vector<size_t> all_test(test.n());
  std::iota(all_test.begin(), all_test.end(), 0);
  const EvalPoint test_ref = rung_point(test, all_test, R - 1, true);
  double ref_flops = 0;
  for (size_t i = 0; i < test.n(); ++i) ref_flops += test.llm_flops[i][R - 1];
  for (size_t r = 0; r < R; ++r) {
    CoverageResult::Rung g;
    g.keep = pool.ladder[r];
    const PlanCheck c = check_plan(point, test_ref, rung_point(test, all_test, r, r + 1 == R));
    g.test_loss = c.loss;
    g.test_violates = !c.within_epsilon;
    g.test_family_violates = !c.families_within;
    g.test_worst_family = c.worst_family;
    double f = 0;
    for (size_t i = 0; i < test.n(); ++i) f += test.llm_flops[i][r];
    g.flops_ratio = ref_flops > 0 ? f / ref_flops : 1.0;
    res.rungs.push_back(g);
  }

  std::mt19937_64 rng(o.seed);
  std::vector<size_t> perm(pool.n());
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<size_t> idx(o.n_calib);
  size_t v_point = 0, v_bound = 0, vf_point = 0, vf_bound = 0;
  double k_point = 0, k_bound = 0, f_point = 0, f_bound = 0;
  for (size_t d = 0; d < o.draws; ++d) {
    if (o.with_replacement) {
      for (auto& i : idx) i = rng() % pool.n();
    } else {
      for (size_t j = 0; j < o.n_calib; ++j)
        std::swap(perm[j], perm[j + rng() % (perm.size() - j)]);  // partial shuffle
      std::copy(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(o.n_calib), idx.begin());
    }
    const EvalPoint ref = rung_point(pool, idx, R - 1, true);
    size_t chosen_point = R - 1, chosen_bound = R - 1;
    bool have_point = false, have_bound = false;
    for (size_t r = 0; r + 1 < R && !(have_point && have_bound); ++r) {
      const EvalPoint p = rung_point(pool, idx, r, false);
      const PlanCheck pc = check_plan(point, ref, p);
      if (!have_point && pc.acceptable()) {
        chosen_point = r;
        have_point = true;
      }
      // A bound is never below its point estimate, so a rung the point rule rejects the bound rejects too.
      if (!have_bound && pc.acceptable() && check_plan(bound, ref, p).acceptable()) {
        chosen_bound = r;
        have_bound = true;
      }
    }
    const auto& gp = res.rungs[chosen_point];
    const auto& gb = res.rungs[chosen_bound];
    ++res.rungs[chosen_point].chosen_point;
    ++res.rungs[chosen_bound].chosen_bound;
    v_point += gp.test_violates;
    v_bound += gb.test_violates;
    vf_point += gp.test_family_violates;
    vf_bound += gb.test_family_violates;
    k_point += static_cast<double>(gp.keep);
    k_bound += static_cast<double>(gb.keep);
    f_point += gp.flops_ratio;
    f_bound += gb.flops_ratio;
  }
  const double n = static_cast<double>(o.draws);
  res.violation_rate_point = v_point / n;
  res.violation_rate_bound = v_bound / n;
  res.family_violation_rate_point = vf_point / n;
  res.family_violation_rate_bound = vf_bound / n;
  res.mean_keep_point = k_point / n;
  res.mean_keep_bound = k_bound / n;
  res.mean_flops_point = f_point / n;
  res.mean_flops_bound = f_bound / n;
  return res;
}

}  // namespace vispco::optimize
