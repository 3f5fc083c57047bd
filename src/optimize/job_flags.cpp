// The shared flags of the evaluating searches and the helpers their runs share; see job_flags.h.
#include "optimize/job_flags.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/errors.h"
#include "model/model_source.h"
#include "optimize/plan_template.h"
#include "prune/scorer.h"

namespace vispco::optimize {

namespace fs = std::filesystem;

void add_job_flags(SearchFlags& flags, JobFlags& j) {
  flags.option("--model", &j.model, kModelFlagHelp);
  flags.require("--model");
  flags.option("--calib", &j.calib, "Calibration dataset (data.jsonl or its folder): the search runs on it");
  flags.require("--calib");
  flags.option("--test", &j.test, "Test dataset: the chosen plan and the unpruned model are evaluated on it");
  flags.option("--scorer", &j.scorer,
               "min-k/budget: the scorer (fastv, visionzip, divprune, random, uniform, pool)");
  flags.option("--layer", &j.layer, "min-k/budget: the stage layer ℓ (default 2 for fastv, else 0)");
  flags.option("--scorers", &j.scorers, "grid: comma-separated scorers (default: all)");
  flags.option(
      "--layers", &j.layers,
      "grid: comma-separated layers, each scorer at those it can act at (default: its default layer); "
      "budget: the layers tried for --scorer");
  flags.option(
      "--template", &j.templates,
      "Plan template(s) instead of --scorer/--scorers, ';'-separated or repeated: 'fastv:layer=2', "
      "a plan with {K}, a plan with keep={P}% (a keep ratio of each image's own N_v, e.g. "
      "'fastv:layer=2,keep={P}%+fastv:layer=4,keep={P}%'), or (budget) 'pdrop:layers=2/4/6' with the "
      "ratio free");
  flags
      .option("--epsilon", &j.epsilon, "Tolerated accuracy loss relative to unpruned, in [0, 1) (0.01 = 1 %)")
      ->capture_default_str();
  flags.option(
      "--epsilon-abs", &j.epsilon_abs,
      "Tolerated accuracy loss in absolute accuracy, in [0, 1] (0.01 = one point), instead of --epsilon");
  flags
      .option(
          "--confidence", &j.confidence,
          "min-k, grid, dynamic-k: accept a plan only when the upper confidence bound on its paired accuracy "
          "loss is within ε (e.g. 0.9; Clopper–Pearson on the samples lost and gained for 0/1 scores); 0 = "
          "point estimate")
      ->capture_default_str();
  flags
      .option("--epsilon-per-family", &j.epsilon_per_family,
              "min-k, grid: every question family with ≥ --min-family-n calibration samples must keep its "
              "loss within E of its own unpruned accuracy (relative, or absolute with --epsilon-abs); with "
              "--confidence by upper bounds, Bonferroni over the families; 0 = off")
      ->capture_default_str();
  flags
      .option("--min-family-n", &j.min_family_n,
              "min-k, grid: families with fewer calibration samples are named, not checked")
      ->capture_default_str();
  flags
      .option("--min-speedup", &j.min_speedup,
              "min-k, grid: a pruned plan is chosen only when its measured calibration prefill speedup "
              "(unpruned ÷ plan) is above this (1 = never slower than unpruned); 0 = off")
      ->capture_default_str();
  flags
      .option("--timing-factor", &j.timing_factor,
              "Flag plans whose measured and FLOPs-model speedups differ by more than this factor")
      ->capture_default_str();
  flags.option("--limit-calib", &j.limit_calib, "First N calibration samples (0 = all)")
      ->capture_default_str();
  flags.option("--limit-test", &j.limit_test, "First N test samples (0 = all)")->capture_default_str();
  flags.option("--batch", &j.batch, "Samples per generate() call")->capture_default_str();
  flags.option("--out", &j.out, "Report folder (optimize.json, optimize.md, plots/)")->capture_default_str();
  flags.option("--store", &j.store, "SQLite result store (default: <out>/results.sqlite)");
  flags.option("--dtype", &j.dtype, kDtypeFlagHelp)->capture_default_str();
  flags.option("--device", &j.device, "cpu | cuda[:N]")->capture_default_str();
  flags
      .option("--threads", &j.threads,
              "Intra-op threads (0 = the CPUs this process may use: affinity, cgroup quota)")
      ->capture_default_str();
  flags.option("--progress", &j.progress, "Per-evaluation progress on stderr: auto | bar | lines | off")
      ->capture_default_str();
  flags.option("--gnuplot", &j.gnuplot, "gnuplot program")->capture_default_str();
  flags.flag("--no-test", &j.no_test, "Do not evaluate on a test split");
  flags.flag("--no-plots,--no-plot", &j.no_plots, "Do not draw plots (no gnuplot needed)");
  flags.flag("--json", &j.json, "Print the report as one JSON object");
}

std::pair<double, bool> job_epsilon(const JobFlags& j, const SearchFlags& flags) {
  if (j.epsilon_abs >= 0 && flags.given("--epsilon"))
    throw InvalidArgument("optimize: give --epsilon (relative) or --epsilon-abs (absolute), not both");
  const bool absolute = j.epsilon_abs >= 0;
  return {absolute ? j.epsilon_abs : j.epsilon, absolute};
}

std::vector<std::string> given_templates(const JobFlags& j) {
  std::vector<std::string> out;
  for (const auto& t : j.templates)
    for (const auto& piece : split_templates(t)) out.push_back(piece);
  if (!out.empty() && (!j.scorer.empty() || !j.scorers.empty()))
    throw InvalidArgument(
        "optimize: give plan templates either with --template or with --scorer/--scorers, not both");
  return out;
}

std::vector<std::string> scorer_templates(const std::string& method, const JobFlags& j, bool layer_list) {
  std::vector<std::string> out = given_templates(j);
  if (!out.empty()) return out;
  if (!j.scorers.empty())
    throw InvalidArgument("optimize --method " + method +
                          ": use --scorer NAME (--scorers is for --method grid)");
  if (j.scorer.empty())
    throw InvalidArgument("optimize --method " + method +
                          ": name the scorer (--scorer fastv) or give --template");
  const int64_t def = default_layer(j.scorer);  // also rejects unknown names
  if (layer_list && !j.layers.empty()) {
    for (const int64_t l : parse_int_list(j.layers, "--layers"))
      out.push_back(j.scorer + ":layer=" + std::to_string(l));
    return out;
  }
  out.push_back(j.scorer + ":layer=" + std::to_string(j.layer >= 0 ? j.layer : def));
  return out;
}

size_t job_batch(const JobFlags& j) {
  if (j.batch < 1) throw InvalidArgument("optimize: --batch must be ≥ 1, got " + std::to_string(j.batch));
  return static_cast<size_t>(j.batch);
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(piece, &used);
      if (used != piece.size()) throw std::invalid_argument(piece);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InvalidArgument("optimize: " + flag + " must be comma-separated integers, got '" + text + "'");
    }
  }
  if (out.empty()) throw InvalidArgument("optimize: " + flag + " is empty");
  return out;
}

void require_path(const std::string& path, const std::string& flag) {
  if (flag == "--model") {
    resolve_model_source(path);  // a folder or a GGUF pair; throws the one-line error
    return;
  }
  if (!fs::exists(path)) throw IoError("optimize: " + flag + " '" + path + "' does not exist");
}

std::string store_or_default(const std::string& store, const std::string& out) {
  return store.empty() ? (fs::path(out) / "results.sqlite").string() : store;
}

OptimizeLog stderr_log() {
  return [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

}  // namespace vispco::optimize
