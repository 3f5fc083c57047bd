// The ε-coverage experiment on real evaluations (see coverage_run.h).
#include "optimize/coverage_run.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/timer.h"
#include "optimize/dynamic_k/ladder_eval.h"
#include "prune/auto_keep/auto_keep.h"

namespace vispco::optimize {

void CoverageRunOptions::validate() const {
  if (template_text.empty())
    throw InvalidArgument("optimize --method coverage: give one --template (or --scorer)");
  if (ladder.empty()) throw InvalidArgument("optimize --method coverage: --ladder is empty");
  for (size_t i = 0; i < ladder.size(); ++i)
    if (ladder[i] < 1 || (i > 0 && ladder[i] <= ladder[i - 1]))
      throw InvalidArgument("optimize --method coverage: --ladder must be ascending K ≥ 1");
  if (batch_size < 1) throw InvalidArgument("optimize --method coverage: batch size must be ≥ 1");
  if (store_path.empty())
    throw InvalidArgument("optimize --method coverage: a result store path is required");
  if (coverage.draws < 1 || coverage.n_calib < 1)
    throw InvalidArgument("optimize --method coverage: need ≥ 1 draw of ≥ 1 calibration sample");
  if (!(coverage.confidence > 0 && coverage.confidence < 1))
    throw InvalidArgument("optimize --method coverage: --confidence must be in (0, 1)");
}

nlohmann::json CoverageRunReport::to_json() const {
  return {{"template", options.template_text}, {"ladder", ladder}, {"n_pool", n_pool}, {"n_test", n_test},
          {"coverage", result.to_json()},      {"inputs", inputs}, {"wall_s", wall_s}};
}

std::string CoverageRunReport::to_markdown() const {
  const CoverageOptions& o = result.options;
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "# vispco optimize — ε coverage\n\nTemplate `%s`; pool %zu samples, test %zu; %zu draws of %zu "
      "calibration samples (%s); ε = %g %s, per-family E = %g (families ≥ %zu samples), confidence "
      "%.2f; wall time %.1f s.\n\n",
      options.template_text.c_str(), n_pool, n_test, o.draws, o.n_calib,
      o.with_replacement ? "with replacement" : "without replacement", o.epsilon,
      o.absolute ? "(absolute)" : "(relative)", o.epsilon_per_family, o.min_family_n, o.confidence, wall_s);
  std::string md = buf;
  for (const auto& [k, v] : inputs.items())
    md += "- " + k + ": `" + (v.is_string() ? v.get<std::string>() : v.dump()) + "`\n";
  md += "\n" + result.to_markdown();
  md += "Rule: " + result.to_json()["rule"].get<std::string>() + ".\n";
  return md;
}

std::string CoverageRunReport::summary() const {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "coverage %s, %zu draws of %zu: test loss > ε in %.1f %% (point) / %.1f %% (bound); a family > E "
      "in %.1f %% / %.1f %%; mean K %.1f / %.1f, mean LLM FLOPs ratio %.3f / %.3f\n",
      options.template_text.c_str(), result.options.draws, result.options.n_calib,
      100 * result.violation_rate_point, 100 * result.violation_rate_bound,
      100 * result.family_violation_rate_point, 100 * result.family_violation_rate_bound,
      result.mean_keep_point, result.mean_keep_bound, result.mean_flops_point, result.mean_flops_bound);
  return buf;
}

CoverageRunReport run_coverage(VisionLanguageModel& model, const std::string& model_dir,
                               const std::string& model_hash, const eval::Dataset& pool,
                               const eval::Dataset& test, const CoverageRunOptions& options,
                               const std::function<void(const std::string&)>& log,
                               eval::WorkSharing* sharing) {
  options.validate();
  Stopwatch wall;
  const LadderPlan lp =
      ladder_plan(options.ladder, options.template_text, model.shape(), "optimize --method coverage");
  const AutoKeepPlan& plan = lp.plan;
  CoverageRunReport rep;
  rep.options = options;
  rep.options.template_text = plan.template_text;
  rep.ladder = lp.ladder;
  const ScorerEnv env{model_dir};
  const auto tagged = [&](const char* split) {
    return [&, split](const std::string& line) {
      if (log) log(std::string("  ") + split + " " + line);
    };
  };
  const LadderEval p = evaluate_ladder(model, model_hash, pool, options.limit_pool, plan, rep.ladder,
                                       options.batch_size, options.store_path, env, tagged("pool"), sharing);
  const LadderEval t = evaluate_ladder(model, model_hash, test, options.limit_test, plan, rep.ladder,
                                       options.batch_size, options.store_path, env, tagged("test"), sharing);
  rep.n_pool = p.table.n();
  rep.n_test = t.table.n();
  if (log) log("coverage: " + std::to_string(options.coverage.draws) + " draws");
  rep.result = epsilon_coverage(p.table, t.table, options.coverage);
  rep.wall_s = wall.ms() / 1000.0;
  return rep;
}

}  // namespace vispco::optimize
