// EvalPoint and the result-store-backed ModelPlanEvaluator; see plan_evaluator.h.
#include "optimize/plan_evaluator.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "eval/distributed/shared_eval.h"
#include "eval/plan_evaluation.h"
#include "eval/result_store.h"
#include "eval/run_key.h"
#include "io/image.h"
#include "model/n_visual_varies.h"
#include "model/vlm.h"
#include "optimize/plan_template.h"

namespace vispco::optimize {
namespace {

double extra_number(const eval::SampleResult& r, const char* key) {
  const auto it = r.extra.find(key);
  return it != r.extra.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

FlopsSpec image_flops_of(VisionLanguageModel& m, const std::string& path) {
  try {
    const cv::Mat rgb = io::load_image_rgb(path);
    return m.family().image_flops(rgb.rows, rgb.cols);
  } catch (const Error&) {
    return m.shape().flops;
  }
}

const char* split_name(Split s) { return s == Split::kCalib ? "calib" : "test"; }

nlohmann::json EvalPoint::to_json() const {
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, f] : per_family)
    fam[name] = {{"n", f.n},
                 {"accuracy", f.accuracy},
                 {"mean_prefill_ms", f.mean_prefill_ms},
                 {"flops_ratio", f.flops_ratio}};
  nlohmann::json j = {{"plan", plan},
                      {"template", template_text},
                      {"param", param},
                      {"keep", keep},
                      {"split", split},
                      {"n", n},
                      {"accuracy", accuracy},
                      {"mean_prefill_ms", mean_prefill_ms},
                      {"mean_vision_ms", mean_vision_ms},
                      {"flops_ratio", flops.llm},
                      {"flops_ratio_with_vision", flops.with_vision},
                      {"mean_llm_gflops", flops.mean_llm_flops / 1e9},
                      {"mean_vision_gflops", flops.mean_vision_flops / 1e9},
                      {"per_family", fam},
                      {"n_evaluated", n_evaluated},
                      {"n_from_store", n_from_store},
                      {"wall_s", wall_s}};
  if (loss_bound) j["loss_bound"] = loss_bound->to_json();
  if (keep_ratio > 0) j["keep_ratio"] = keep_ratio;
  return j;
}

void fill_plan_figures(EvalPoint& point, const PruningPlan& plan, const ModelShape& shape, Split split,
                       const std::vector<int64_t>& n_text, const std::vector<std::string>& family,
                       const std::string& template_text, int64_t param,
                       const std::vector<FlopsSpec>& images) {
  point.plan = plan.to_string();
  point.template_text = plan.empty() ? "none" : template_text;
  point.param = plan.empty() ? shape.n_visual_tokens : param;
  point.keep_ratio =
      !plan.empty() && is_keep_ratio_template(template_text) ? static_cast<double>(param) / 1000.0 : 0.0;
  point.keep = plan.empty() ? shape.n_visual_tokens : plan.stages.back().keep;
  point.split = split_name(split);
  point.flops = plan_flops_ratio(plan, shape, n_text, images);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<FlopsSpec>>> by_family;
  for (size_t i = 0; i < n_text.size() && i < family.size(); ++i) {
    auto& [lengths, specs] = by_family[family[i]];
    lengths.push_back(n_text[i]);
    if (!images.empty()) specs.push_back(images[i]);
  }
  for (const auto& [name, f] : by_family)
    point.per_family[name].flops_ratio = plan_flops_ratio(plan, shape, f.first, f.second).llm;
}

ModelPlanEvaluator::ModelPlanEvaluator(VisionLanguageModel& model, std::string model_hash,
                                       const eval::Dataset& calib, const eval::Dataset& test,
                                       ModelEvalSettings settings)
    : model_(model), model_hash_(std::move(model_hash)), settings_(std::move(settings)) {
  if (settings_.store_path.empty())
    throw InvalidArgument("optimize: a result store path is required (searches resume through it)");
  if (settings_.batch_size < 1) throw InvalidArgument("optimize: batch size must be ≥ 1, got 0");
  const auto fill = [&](SplitData& d, const eval::Dataset& ds, size_t limit, const char* name) {
    d.dataset = &ds;
    d.limit = limit;
    const size_t n = limit == 0 ? ds.samples.size() : std::min(limit, ds.samples.size());
    if (n == 0)
      throw InvalidArgument(std::string("optimize: the ") + name + " split '" + ds.jsonl_path +
                            "' has no samples");
    for (size_t i = 0; i < n; ++i) {
      const auto& s = ds.samples[i];
      d.n_text.push_back(static_cast<int64_t>(model_.prompt_ids(s.question).size()) - 1);  // − placeholder
      d.family.push_back(s.family);
      if (n_visual_varies(model_.shape())) d.images.push_back(image_flops_of(model_, s.image_path));
    }
  };
  fill(calib_, calib, settings_.limit_calib, "calibration");
  fill(test_, test, settings_.limit_test, "test");
}

const std::vector<int64_t>& ModelPlanEvaluator::text_lengths(Split split) const { return data(split).n_text; }

const std::vector<FlopsSpec>& ModelPlanEvaluator::image_flops(Split split) const {
  return data(split).images;
}

EvalPoint ModelPlanEvaluator::evaluate(const PruningPlan& plan, Split split, const std::string& template_text,
                                       int64_t param) {
  const SplitData& d = data(split);
  plan.validate(model_.shape());
  eval::EvalOptions o;
  o.limit = d.limit;
  o.batch_size = settings_.batch_size;
  o.store_path = settings_.store_path;
  o.progress = settings_.progress;
  const eval::EvalReport rep =
      settings_.sharing != nullptr
          ? eval::evaluate_plan_shared(model_, model_hash_, *d.dataset, o,
                                       BoundPlan::bind(plan, model_.shape(), settings_.env),
                                       *settings_.sharing)
          : eval::evaluate_plan(model_, model_hash_, *d.dataset, o, plan, settings_.env);

  EvalPoint p;
  fill_plan_figures(p, plan, model_.shape(), split, d.n_text, d.family, template_text, param, d.images);
  p.n = rep.rows.size();
  p.accuracy = rep.metrics.overall.accuracy();
  p.mean_prefill_ms = rep.mean_prefill_ms;
  std::map<std::string, std::pair<double, size_t>> prefill;  // family → (Σ ms, n)
  for (const auto& row : rep.rows) {
    p.scores.push_back(row.score.score());
    p.families.push_back(row.family);
    p.mean_vision_ms += extra_number(row.result, "vision_ms");
    auto& [sum, n] = prefill[row.family];
    sum += row.result.prefill_ms;
    ++n;
  }
  if (p.n > 0) p.mean_vision_ms /= static_cast<double>(p.n);
  for (const auto& [name, totals] : rep.metrics.per_family) {
    FamilyFigures& f = p.per_family[name];
    f.n = totals.n;
    f.accuracy = totals.accuracy();
    const auto& [sum, n] = prefill[name];
    f.mean_prefill_ms = n > 0 ? sum / static_cast<double>(n) : 0.0;
  }
  p.n_evaluated = rep.n_evaluated;
  p.n_from_store = rep.n_from_store;
  p.wall_s = rep.wall_s;
  if (settings_.log) {
    char buf[160];
    std::snprintf(
        buf, sizeof buf, "  %-5s acc %.4f  FLOPs %.3f  prefill %7.2f ms  (%zu new, %zu stored, %.1f s)  ",
        p.split.c_str(), p.accuracy, p.flops.llm, p.mean_prefill_ms, p.n_evaluated, p.n_from_store, p.wall_s);
    settings_.log(buf + p.plan);
  }
  return p;
}

std::string ModelPlanEvaluator::result_key(const PruningPlan& plan) {
  return eval::plan_store_key(plan, model_.shape(), settings_.env);
}

std::vector<std::string> ModelPlanEvaluator::complete_plans(Split split) {
  if (settings_.sharing != nullptr && settings_.sharing->options().world_size > 1) {
    // Only rank 0 has the store: its list, on every rank, so that every rank's search takes the same steps.
    eval::WorkSharing& sh = *settings_.sharing;
    const nlohmann::json list = sh.is_main() ? nlohmann::json(local_complete_plans(split)) : nlohmann::json();
    return nlohmann::json::parse(sh.broadcast(list.dump())).get<std::vector<std::string>>();
  }
  return local_complete_plans(split);
}

std::vector<std::string> ModelPlanEvaluator::local_complete_plans(Split split) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(settings_.store_path)) return out;
  const SplitData& d = data(split);
  const std::string decoding = eval::decoding_key(eval::default_eval_generation(), model_.context().dtype);
  eval::ResultStore store(settings_.store_path);
  for (const eval::RunKey& key : store.runs()) {
    if (key.model_hash != model_hash_ || key.dataset_hash != d.dataset->hash || key.decoding != decoding)
      continue;
    const std::set<std::string> done = store.done_ids(key);
    bool complete = true;
    for (size_t i = 0; i < d.n_text.size() && complete; ++i)
      complete = done.count(d.dataset->samples[i].id) > 0;
    if (complete) out.push_back(key.plan);
  }
  return out;
}

}  // namespace vispco::optimize
