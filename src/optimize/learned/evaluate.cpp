// Predicted plans per sample and budget, grouped and evaluated through the evaluator (VisPCO §3.5).
#include "optimize/learned/evaluate.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "eval/evaluator.h"
#include "eval/plan_evaluation.h"
#include "io/image.h"
#include "optimize/learned/batch.h"
#include "optimize/learned/budget_projection.h"
#include "optimize/learned/flops_constraint.h"
#include "optimize/learned/kernels.h"
#include "optimize/learned/trainer.h"
#include "optimize/plan_flops.h"

namespace vispco::optimize::learned {

void BudgetEvalOptions::validate() const {
  if (budgets.empty()) throw InvalidArgument("VisPCO: --budgets must hold at least one budget");
  for (double b : budgets)
    if (!(b > 0 && b <= 1))
      throw InvalidArgument("VisPCO: budgets must be in (0, 1], got " + std::to_string(b));
  if (batch < 1) throw InvalidArgument("VisPCO: evaluation batch must be ≥ 1");
}

nlohmann::json BudgetPoint::to_json() const {
  using P = BudgetPoint;
  // clang-format off
  static const JsonFields<P> fields("budget point", {
      {"budget", &P::budget}, {"n", &P::n}, {"accuracy", &P::accuracy}, {"flops_ratio", &P::flops_ratio},
      {"achieved_budget", &P::achieved_budget}, {"flops_error", &P::flops_error},
      {"mean_abs_flops_error", &P::mean_abs_flops_error}, {"raw_flops_error", &P::raw_flops_error},
      {"raw_mean_abs_flops_error", &P::raw_mean_abs_flops_error}, {"projected", &P::projected},
      {"mean_keep", &P::mean_keep}, {"n_plans", &P::n_plans}, {"common_plan", &P::common_plan},
      {"common_plan_count", &P::common_plan_count}, {"seconds", &P::seconds}});
  // clang-format on
  auto j = fields.write(*this);
  j["metrics"] = metrics.to_json();
  return j;
}

std::vector<BudgetPoint> evaluate_budgets(VisionLanguageModel& model, const std::string& model_hash,
                                          Predictor& predictor, const SearchOptions& search,
                                          const eval::Dataset& dataset, const BudgetEvalOptions& opts,
                                          const std::function<void(const std::string&)>& progress) {
  opts.validate();
  const auto& shape = model.shape();
  const int64_t L = shape.n_layers, n_v = shape.n_visual_tokens;
  const int64_t first = search_first_layer(search);
  FlopsConstraint fc(shape, first, search.floor);
  const size_t n = opts.limit > 0 ? std::min(opts.limit, dataset.samples.size()) : dataset.samples.size();
  if (n == 0) throw InvalidArgument("VisPCO: the evaluation dataset is empty");
  const size_t nb = opts.budgets.size();

  // Pass 1: predicted counts of every sample at every budget (one image encoding per sample).
  Stopwatch predict_sw;
  std::vector<std::vector<std::vector<int64_t>>> counts(nb, std::vector<std::vector<int64_t>>(n));
  auto raw_counts = counts;  // before the projection
  std::vector<int64_t> n_text(n);
  predictor->eval();
  for (size_t start = 0; start < n; start += opts.batch) {
    std::vector<PromptSample> ps;
    const size_t end = std::min(n, start + opts.batch);
    for (size_t i = start; i < end; ++i) {
      const auto& s = dataset.samples[i];
      PromptSample p;
      p.pixels = model.preprocess(io::load_image_rgb(s.image_path));
      p.prompt_ids = model.prompt_ids(s.question);
      ps.push_back(std::move(p));
    }
    auto batch = make_prompt_batch(model, ps);
    const int64_t B = static_cast<int64_t>(ps.size());
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < nb; ++k) {
      auto bud = at::full({B}, opts.budgets[k], at::kFloat);
      auto R = predict_keep_fractions(predictor, search.kernel, batch, bud, L, first).cpu();
      auto Rp = opts.project ? project_to_budget(fc, batch.n_text, R, bud) : R;
      for (int64_t b = 0; b < B; ++b) {
        raw_counts[k][start + b] = keep_counts(R[b], n_v);
        counts[k][start + b] = opts.project ? keep_counts(Rp[b], n_v) : raw_counts[k][start + b];
      }
    }
    for (int64_t b = 0; b < B; ++b) n_text[start + b] = batch.n_text[b].item<int64_t>();
  }
  const double predict_s = predict_sw.ms() / 1000.0;

  std::vector<BudgetPoint> points;
  for (size_t k = 0; k < nb; ++k) {
    Stopwatch sw;
    BudgetPoint pt;
    pt.budget = opts.budgets[k];
    pt.mean_keep.assign(L, 0.0);
    // Group samples by plan.
    std::map<std::string, eval::PlanGroup> groups;
    double sum_a = 0, sum_t = 0, sum_lo = 0, sum_hi = 0, sum_abs = 0, llm_plan = 0, llm_full = 0;
    double sum_a_raw = 0, sum_abs_raw = 0;
    for (size_t i = 0; i < n; ++i) {
      auto plan = plan_from_counts(counts[k][i], n_v, search.scorer);
      auto& group = groups[plan.to_string()];
      group.plan = plan;
      group.samples.push_back(i);
      const double a = double(fc.decoder_flops(n_text[i], counts[k][i]));
      auto nt = at::full({1}, n_text[i], at::kLong);
      const double t = fc.target_flops(nt, at::full({1}, pt.budget, at::kDouble)).item<double>();
      sum_a += a;
      sum_t += t;
      sum_lo += fc.min_flops(nt).item<double>();
      sum_hi += fc.max_flops(nt).item<double>();
      sum_abs += std::abs(a - t) / t;
      const double a_raw = double(fc.decoder_flops(n_text[i], raw_counts[k][i]));
      sum_a_raw += a_raw;
      sum_abs_raw += std::abs(a_raw - t) / t;
      // The frontier's x-axis, costed as every search costs a plan (optimize/plan_flops.h).
      const auto r = optimize::plan_flops_ratio(plan, shape, {n_text[i]});
      llm_plan += r.mean_llm_flops;
      llm_full += r.mean_llm_flops / r.llm;
      for (int64_t l = 0; l < L; ++l) pt.mean_keep[l] += double(counts[k][i][l]) / double(n);
    }
    pt.flops_ratio = llm_plan / llm_full;
    pt.achieved_budget = (sum_a - sum_lo) / (sum_hi - sum_lo);
    pt.flops_error = sum_a / sum_t - 1.0;
    pt.mean_abs_flops_error = sum_abs / double(n);
    pt.raw_flops_error = sum_a_raw / sum_t - 1.0;
    pt.raw_mean_abs_flops_error = sum_abs_raw / double(n);
    pt.projected = opts.project;
    pt.n_plans = groups.size();
    for (const auto& [key, group] : groups)
      if (group.samples.size() > pt.common_plan_count) {
        pt.common_plan = key;
        pt.common_plan_count = group.samples.size();
      }
    // Evaluate every group through the physical-removal path.
    eval::EvalOptions eo;
    eo.batch_size = opts.batch;
    eo.store_path = opts.store_path;
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    eval::evaluate_plan_groups(model, model_hash, dataset, eo, groups, order, opts.env, /*seed=*/0,
                               [&](const std::string& key, const eval::EvalReport& rep) {
                                 for (const auto& row : rep.rows)
                                   pt.metrics.add(row.family, row.score);  // group by group
                                 if (progress)
                                   progress("budget " + std::to_string(pt.budget).substr(0, 5) + ": plan " +
                                            key + " on " + std::to_string(rep.n_selected) +
                                            " samples, accuracy " +
                                            std::to_string(rep.metrics.overall.accuracy()));
                               });
    pt.n = pt.metrics.overall.n;
    pt.accuracy = pt.metrics.overall.accuracy();
    pt.seconds = sw.ms() / 1000.0 + predict_s / double(nb);
    points.push_back(pt);
  }
  return points;
}

}  // namespace vispco::optimize::learned
