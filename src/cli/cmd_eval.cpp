// `vispco eval`: evaluate a model on a jsonl VQA dataset (greedy answers, metrics overall and per family),
// resumable through the SQLite result store; prints the summary table (or JSON) at the end.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <regex>
#include <string>
#include <tuple>

#include "cli/commands.h"
#include "cli/sweep_flags.h"
#include "core/context.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/distributed/shared_eval.h"
#include "eval/evaluator.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "model/family.h"
#include "model/quant.h"
#include "model/vlm.h"
#include "optimize/dynamic_k/auto_keep_eval.h"
#include "optimize/sweep_group.h"
#include "prune/bound_plan.h"

namespace vispco::cli {
namespace {

struct EvalArgs {
  std::string model, data, plan = "none", shard = "0/1", store, out = "eval_out", dtype = "auto",
                           device = "cpu", progress = "auto";
  int64_t limit = 0, batch = 1;  // signed, so "-1" is an error rather than a huge size_t
  int64_t max_new_tokens = eval::default_eval_generation().max_new_tokens;
  int threads = 0;
  int64_t shuffle_images = kNoShuffle;
  static constexpr int64_t kNoShuffle = std::numeric_limits<int64_t>::min();
  bool skip_missing = false, allow_outside = false, json = false;
  QuantFlags quant;
  optimize::SweepFlags sweep;
};

// "i/n" → (i, n). @throws InvalidArgument.
std::pair<size_t, size_t> parse_shard(const std::string& text) {
  static const std::regex re(R"(\s*(\d{1,9})\s*/\s*(\d{1,9})\s*)");
  std::smatch m;
  if (!std::regex_match(text, m, re))
    throw InvalidArgument("eval: --shard must be i/n with 0 ≤ i < n (e.g. 0/4), got '" + text + "'");
  return {std::stoul(m[1]), std::stoul(m[2])};
}

void run_eval(const EvalArgs& a) {
  eval::EvalOptions o;
  if (a.limit < 0)
    throw InvalidArgument("eval: --limit must be ≥ 0 (0 = all), got " + std::to_string(a.limit));
  if (a.batch < 1) throw InvalidArgument("eval: batch size must be ≥ 1, got " + std::to_string(a.batch));
  o.limit = static_cast<size_t>(a.limit);
  std::tie(o.shard_index, o.shard_count) = parse_shard(a.shard);
  o.batch_size = static_cast<size_t>(a.batch);
  o.generation.max_new_tokens = a.max_new_tokens;
  const ModelShape shape = load_model_shape(a.model);  // cheap: checks the plan before the slow steps
  // The plan bound once, before the slow steps: its scorers (and a keep=auto predictor) checked and loaded;
  // its key (+ a learned gate's hash) keys the results.
  const BoundPlan bound = BoundPlan::bind(a.plan, shape, ScorerEnv{a.model});
  const bool auto_keep = bound.is_auto();
  o.plan = bound.key();
  o.out_dir = a.out;
  o.store_path = a.store.empty() ? (std::filesystem::path(a.out) / "results.sqlite").string() : a.store;
  o.on_missing_image = a.skip_missing ? eval::MissingImagePolicy::kSkip : eval::MissingImagePolicy::kStop;
  o.progress = a.json ? eval::ProgressMode::kOff : eval::parse_progress_mode(a.progress);
  if (a.shuffle_images != EvalArgs::kNoShuffle) {
    if (a.shuffle_images < 0)
      throw InvalidArgument("eval: --shuffle-images takes a seed ≥ 0, got " +
                            std::to_string(a.shuffle_images));
    o.shuffle_images = static_cast<uint64_t>(a.shuffle_images);
  }
  o.validate();  // before the slow steps

  // Under a launcher (torchrun, srun, mpirun): join the group first, so a bad address fails before the slow
  // steps; rank 0 alone writes the store and the outputs.
  const optimize::LaunchFromEnvironment launch = optimize::launch_from_environment();
  if (launch.env.distributed() && auto_keep)
    throw InvalidArgument("eval: keep=auto plans do not run under a launcher yet; run them in one process");
  const auto group = optimize::SweepGroup::join(launch.env, a.sweep, launch.test_exit_after_items);
  const bool main_rank = !group || group->sharing().is_main();
  if (!main_rank) o.progress = eval::ProgressMode::kOff;

  DtypeChoice dtype_choice;
  const RunContext ctx =
      inference_context(optimize::rank_device(a.device, launch.env), a.dtype, a.threads, &dtype_choice);

  eval::DatasetOptions dopts;
  dopts.allow_outside = a.allow_outside;
  dopts.on_missing_image = o.on_missing_image;
  const eval::Dataset ds = eval::load_dataset(a.data, dopts);
  for (const std::string& w : ds.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  parse_quant(a.quant.quant);  // a bad name fails before the slow steps
  const std::string model_hash = quant_model_key(eval::model_folder_hash(a.model), a.quant);
  auto model = VisionLanguageModel::load(a.model, ctx);
  apply_quant(model, a.quant);

  nlohmann::json dynamic;  // keep=auto: K groups, batching, prediction cost
  eval::EvalReport rep;
  if (auto_keep) {
    auto res = optimize::evaluate_auto_keep(model, model_hash, ds, o, bound);
    dynamic = res.to_json();
    dynamic.erase("report");
    rep = std::move(res.report);
  } else if (group) {
    rep = eval::evaluate_plan_shared(model, model_hash, ds, o, bound, group->sharing());
    group->sharing().finish();
  } else {
    rep = eval::evaluate_plan(model, model_hash, ds, o, bound);
  }
  if (!main_rank) return;  // its results are in rank 0's store and report
  if (a.json) {
    nlohmann::json j = rep.to_json();
    if (auto_keep) j["dynamic_k"] = dynamic;
    j["options"] = eval::to_json(o);
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << rep.to_markdown();
  if (auto_keep) std::cout << "\nkeep=auto: " << dynamic.dump() << "\n";
  std::cout << "\nwrote " << o.out_dir << "/{predictions.jsonl, summary.json, summary.md}; store "
            << o.store_path << "\n";
  std::fprintf(stderr, "dtype: %s\n",
               dtype_choice.describe().c_str());  // after success: errors stay one line
}

}  // namespace

void register_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a model on a jsonl VQA dataset (resumable)");
  cmd->add_option("--model", a->model, kModelHelp)->required();
  cmd->add_option("--data", a->data, "data.jsonl or its folder")->required();
  cmd->add_option(
         "--plan", a->plan,
         "Pruning plan: 'scorer:[layer=L,]keep=K[+…]' (layer defaults to the method's paper layer), "
         "'scorer:[layer=L,]keep=auto[:file=P]' (per-sample K from a K predictor), "
         "'pdrop:[layers=a/b/c,]ratio=r|keep=K', a .json file, or none; a scorer with per-token scores "
         "takes select=topk|mmr|dpp (README, Scorer × selector)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "Only the first N samples (0 = all); applied before --shard")
      ->capture_default_str();
  cmd->add_option("--shard", a->shard, "Shard i/n: samples with index % n == i")->capture_default_str();
  cmd->add_option("--batch", a->batch, "Samples per generate() call")->capture_default_str();
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "Most tokens generated per answer")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Output folder (predictions.jsonl, summary.json, summary.md)")
      ->capture_default_str();
  cmd->add_option("--store", a->store, "SQLite result store (default: <out>/results.sqlite)");
  add_compute_flags(cmd, &a->dtype, &a->device, &a->threads);
  add_quant_flags(cmd, &a->quant);
  cmd->add_option("--progress", a->progress, "Progress on stderr: auto | bar | lines | off")
      ->capture_default_str();
  cmd->add_option("--shuffle-images", a->shuffle_images,
                  "Image-dependence check: show each sample another sample's image (seeded derangement); "
                  "results stored apart");
  cmd->add_flag("--skip-missing", a->skip_missing,
                "Skip samples whose image is missing/unreadable (default: stop)");
  cmd->add_flag("--allow-outside", a->allow_outside, "Allow image paths outside the dataset folder");
  cmd->add_flag("--json", a->json, "Print the summary as one JSON object (no progress)");
  add_sweep_flags(cmd, &a->sweep);
  cmd->callback([a, cmd] {
    EvalArgs args = *a;
    args.plan = plan_for_model(args.model, args.plan, cmd->count("--plan") > 0);
    run_eval(args);
  });
}

}  // namespace vispco::cli
