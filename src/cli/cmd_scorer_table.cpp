// `vispco scorer-table`: evaluates every pruning scorer at several K on one model and dataset and writes the
// Markdown table (docs/scorers.md) and its JSON; resumable through the result store
// (optimize/scorer_table.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/sweep_flags.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/named_table.h"
#include "core/text_file.h"
#include "model/vlm.h"
#include "optimize/scorer_table.h"

namespace vispco::cli {
namespace {

struct ScorerTableArgs {
  std::string model, data, out = "docs/scorers.md", json, store, keeps = "192,128,64,32", scorers, banner,
                           dtype = "auto", device = "cpu", progress = "auto";
  int64_t limit = 0, batch = 4, layer = 2;
  int threads = 0;
  optimize::SweepFlags sweep;
  std::vector<std::string> argv;  // for the provenance line
};

void run_scorer_table(const ScorerTableArgs& a) {
  optimize::ScorerTableOptions o;
  o.keeps.clear();
  for (const auto& k : split_names(a.keeps)) {
    try {
      size_t used = 0;
      o.keeps.push_back(std::stoll(k, &used));
      if (used != k.size()) throw std::invalid_argument(k);
    } catch (const std::exception&) {
      throw InvalidArgument("scorer-table: --keeps must be integers separated by commas (got '" + a.keeps +
                            "')");
    }
  }
  o.scorers = split_names(a.scorers);
  o.llm_layer = a.layer;
  if (a.limit < 0) throw InvalidArgument("scorer-table: --limit must be ≥ 0 (0 = all)");
  if (a.batch < 1) throw InvalidArgument("scorer-table: --batch must be ≥ 1");
  o.eval.limit = static_cast<size_t>(a.limit);
  o.eval.batch_size = static_cast<size_t>(a.batch);
  o.eval.store_path = a.store.empty() ? "out/scorer-table/results.sqlite" : a.store;
  o.eval.progress = eval::parse_progress_mode(a.progress);
  o.validate();
  // Under a launcher: joined before the slow steps; every rank evaluates its share of each cell, rank 0
  // writes the store and the table.
  const optimize::LaunchFromEnvironment launch = optimize::launch_from_environment();
  const auto group = optimize::SweepGroup::join(launch.env, a.sweep, launch.test_exit_after_items);
  const bool main_rank = !group || group->sharing().is_main();
  if (!main_rank) o.eval.progress = eval::ProgressMode::kOff;
  const std::string prefix = group ? group->sharing().log_prefix() : "";
  DtypeChoice dtype_choice;
  const RunContext ctx =
      inference_context(optimize::rank_device(a.device, launch.env), a.dtype, a.threads, &dtype_choice);
  const eval::Dataset ds = eval::load_dataset(a.data);
  auto model = VisionLanguageModel::load(a.model, ctx);
  auto table = optimize::run_scorer_table(
      model, a.model, ds, o,
      [&prefix](const optimize::ScorerTableCell& c) {
        std::fprintf(stderr, "%s[scorer-table] %-10s K=%-4ld accuracy %5.1f %%  FLOPs %4.0f %%  (%s)\n",
                     prefix.c_str(), c.scorer.c_str(), (long)c.keep, 100.0 * c.metrics.overall.accuracy(),
                     100.0 * c.flops_ratio, c.plan.c_str());
      },
      group ? &group->sharing() : nullptr);
  if (group) group->sharing().finish();
  if (!main_rank) return;  // rank 0 writes the table
  std::string command = "vispco";
  for (const auto& s : a.argv) command += " " + s;
  write_text_atomically(a.out, table.to_markdown(command, a.banner));
  const std::string json_path =
      a.json.empty() ? std::filesystem::path(a.out).replace_extension(".json").string() : a.json;
  write_text_atomically(json_path, table.to_json().dump(2) + "\n");
  std::cout << "wrote " << a.out << " and " << json_path << " (" << table.cells.size() << " cells, "
            << table.n_samples << " samples each; store " << o.eval.store_path << ")\n";
  std::fprintf(stderr, "dtype: %s\n",
               dtype_choice.describe().c_str());  // after success: errors stay one line
}

}  // namespace

void register_scorer_table(CLI::App& app) {
  auto a = std::make_shared<ScorerTableArgs>();
  auto* cmd = app.add_subcommand(
      "scorer-table",
      "Accuracy of every pruning scorer at several K, per family → Markdown + JSON (resumable)");
  cmd->add_option("--model", a->model, kModelHelp)->required();
  cmd->add_option("--data", a->data, "data.jsonl or its folder (e.g. the SynthVQA test split)")->required();
  cmd->add_option("--out", a->out, "Markdown file to write")->capture_default_str();
  cmd->add_option("--json", a->json, "JSON file to write (default: --out with .json)");
  cmd->add_option("--keeps", a->keeps, "Kept visual tokens K, comma-separated")->capture_default_str();
  cmd->add_option("--scorers", a->scorers,
                  "Scorers, comma-separated (default: every registered one and pdrop; gate when trained)");
  cmd->add_option("--layer", a->layer, "Layer ℓ of the in-LLM scorers (fastv, sparsevlm, dart)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "Only the first N samples (0 = all)")->capture_default_str();
  cmd->add_option("--batch", a->batch, "Samples per generate() call")->capture_default_str();
  cmd->add_option("--store", a->store, "SQLite result store (default out/scorer-table/results.sqlite)");
  cmd->add_option("--banner", a->banner,
                  "A line printed in bold at the top (e.g. 'random weights: chance level')");
  add_compute_flags(cmd, &a->dtype, &a->device, &a->threads);
  cmd->add_option("--progress", a->progress, "Progress on stderr: auto | bar | lines | off")
      ->capture_default_str();
  add_sweep_flags(cmd, &a->sweep);
  cmd->callback([a, cmd] {
    a->argv = {"scorer-table"};
    for (const auto* opt : cmd->get_options())
      if (opt->count() > 0 && opt->get_name() != "--help") {
        a->argv.push_back(opt->get_name());
        for (const auto& r : opt->results())
          a->argv.push_back(r.find(' ') == std::string::npos ? r : "'" + r + "'");
      }
    run_scorer_table(*a);
  });
}

}  // namespace vispco::cli
