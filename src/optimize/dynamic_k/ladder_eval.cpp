// Ladder tables from the result store (see ladder_eval.h).
#include "optimize/dynamic_k/ladder_eval.h"

#include <memory>

#include "core/errors.h"
#include "eval/distributed/shared_eval.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "eval/plan_evaluation.h"
#include "model/n_visual_varies.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plan_flops.h"

namespace vispco::optimize {

LadderPlan ladder_plan(const std::vector<int64_t>& ladder, const std::string& template_text,
                       const ModelShape& shape, const std::string& who, bool permille) {
  const int64_t full = permille ? 1000 : shape.n_visual_tokens;
  const std::string full_name = permille ? "1000 ‰ (keep ratios in ‰ of each image's N_v)" : "N_v";
  LadderPlan out;
  for (const int64_t k : ladder) {
    if (k > full)
      throw InvalidArgument(who + ": ladder value " + std::to_string(k) + " exceeds " + full_name + " = " +
                            std::to_string(full));
    out.ladder.push_back(k);
  }
  if (out.ladder.empty() || out.ladder.back() != full) out.ladder.push_back(full);
  if (out.ladder.size() < 2) throw InvalidArgument(who + ": the ladder needs a rung below " + full_name);
  out.plan = parse_auto_keep(auto_keep_text(template_text), shape);
  out.plan.permille = permille;
  return out;
}

LadderEval evaluate_ladder(VisionLanguageModel& m, const std::string& model_hash, const eval::Dataset& ds,
                           size_t limit, const AutoKeepPlan& plan, const std::vector<int64_t>& ladder,
                           size_t batch, const std::string& store_path, const ScorerEnv& env,
                           const std::function<void(const std::string&)>& log, eval::WorkSharing* sharing) {
  const auto& shape = m.shape();
  const size_t n = limit == 0 ? ds.samples.size() : std::min(limit, ds.samples.size());
  if (n == 0) throw InvalidArgument("dynamic-k: a split has no samples");
  if (ladder.empty() || !plan.full(ladder.back(), shape))
    throw InvalidArgument(
        "dynamic-k: the ladder must end at " +
        (plan.permille ? std::string("1000 ‰") : "N_v = " + std::to_string(shape.n_visual_tokens)));
  LadderEval out;
  LadderTable& t = out.table;
  t.ladder = ladder;
  std::vector<int64_t> n_text;
  std::vector<FlopsSpec> images;  // [n] each image's own N_v and vision FLOPs, where they vary; else empty
  const bool varies = n_visual_varies(shape);
  for (size_t i = 0; i < n; ++i) {
    t.ids.push_back(ds.samples[i].id);
    t.families.push_back(ds.samples[i].family);
    n_text.push_back(static_cast<int64_t>(m.prompt_ids(ds.samples[i].question).size()) - 1);  // − placeholder
    if (varies) images.push_back(image_flops_of(m, ds.samples[i].image_path));
  }
  const size_t R = ladder.size();
  t.score.assign(n, std::vector<double>(R, 0.0));
  t.agree.assign(n, std::vector<uint8_t>(R, 0));
  t.llm_flops.assign(n, std::vector<double>(R, 0.0));
  std::vector<std::vector<std::string>> pred(n, std::vector<std::string>(R));
  for (size_t r = 0; r < R; ++r) {
    eval::EvalOptions eo;
    eo.limit = n;
    eo.batch_size = batch;
    eo.store_path = store_path;
    const bool full = r + 1 == R;
    const PruningPlan static_plan = full ? PruningPlan{} : plan.at(ladder[r], shape);
    // Under a launcher the rung is one shared sweep (every rank runs the rungs in the same order, so the
    // sweeps meet); its rows are rank 0's, the same on every rank.
    const auto rep = sharing != nullptr
                         ? eval::evaluate_plan_shared(m, model_hash, ds, eo,
                                                      BoundPlan::bind(static_plan, shape, env), *sharing)
                         : eval::evaluate_plan(m, model_hash, ds, eo, static_plan, env);
    if (rep.rows.size() != n) throw IoError("dynamic-k: an evaluation returned fewer rows than samples");
    if (full) out.unpruned_prefill_ms = rep.mean_prefill_ms;
    std::map<int64_t, double> flops_of_length;  // prompts of equal length share the figure (one image size)
    for (size_t i = 0; i < n; ++i) {
      t.score[i][r] = rep.rows[i].score.score();
      pred[i][r] = eval::normalize_answer(rep.rows[i].result.prediction);
      if (varies) {  // at the image's own N_v: a keep ratio keeps its share of it
        t.llm_flops[i][r] = plan_flops_ratio(static_plan, shape, {n_text[i]}, {images[i]}).mean_llm_flops;
        continue;
      }
      auto it = flops_of_length.find(n_text[i]);
      if (it == flops_of_length.end())
        it = flops_of_length
                 .emplace(n_text[i], plan_flops_ratio(static_plan, shape, {n_text[i]}).mean_llm_flops)
                 .first;
      t.llm_flops[i][r] = it->second;
    }
    if (log)
      log(plan.keep_text(ladder[r]) + " accuracy " + std::to_string(rep.metrics.overall.accuracy()) + " (" +
          std::to_string(rep.n_evaluated) + " new, " + std::to_string(rep.n_from_store) + " stored)");
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t r = 0; r < R; ++r) t.agree[i][r] = pred[i][r] == pred[i][R - 1] ? 1 : 0;
  return out;
}

}  // namespace vispco::optimize
