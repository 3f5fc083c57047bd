// `vispco optimize`: choose a pruning plan under a constraint on a calibration split (min-k: smallest K
// within ε; budget: best plan within a FLOPs ratio; grid: Pareto frontier), evaluate it against the unpruned
// model on a test split, and write optimize.json, optimize.md and gnuplot plots (optimize/optimize.h,
// plots.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "model/model_source.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/text_file.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "model/family.h"
#include "model/vlm.h"
#include "optimize/coverage_run.h"
#include "optimize/dynamic_k/auto_keep.h"
#include "optimize/dynamic_k/dynamic_k.h"
#include "optimize/optimize.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plan_template.h"
#include "optimize/plots.h"
#include "prune/scorer.h"

namespace vispco::cli {
namespace {

namespace fs = std::filesystem;

struct OptimizeArgs {
  std::string model, calib, test, train, ladder, target = "correct", method, scorer, scorers, layers, keep,
                                                 out = "optimize_out", store, dtype = "auto", device = "cpu",
                                                 progress = "auto", gnuplot = "gnuplot";
  std::vector<std::string> templates;
  int64_t layer = -1, limit_calib = 0, limit_test = 0, limit_train = 0, batch = 8, hidden = 64,
          predictor_steps = 600;
  double epsilon = 0.01, epsilon_abs = -1, flops_ratio = 0, confidence = 0, epsilon_per_family = 0,
         min_speedup = 1.0, timing_factor = 2.0;
  int64_t min_family_n = 30, coverage_draws = 500, seed = 0;
  bool with_replacement = false;
  int64_t k_min = 1, k_max = 0, k_step = 1;
  int threads = 0;
  bool no_test = false, no_plots = false, json = false;
  bool epsilon_given = false;
};

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

std::vector<std::string> parse_name_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ','))
    if (!piece.empty()) out.push_back(piece);
  return out;
}

// The plan templates the flags describe (before the model is loaded: scorer names are checked here).
std::vector<std::string> build_templates(const OptimizeArgs& a) {
  std::vector<std::string> out;
  for (const auto& t : a.templates)
    for (const auto& piece : optimize::split_templates(t)) out.push_back(piece);
  const bool from_scorer = !a.scorer.empty() || !a.scorers.empty();
  if (!out.empty() && from_scorer)
    throw InvalidArgument(
        "optimize: give plan templates either with --template or with --scorer/--scorers, not both");
  if (!out.empty()) return out;
  if (a.method == "grid") {
    std::vector<std::string> names = parse_name_list(a.scorers.empty() ? a.scorer : a.scorers);
    if (names.empty())
      for (const auto& e : scorer_registry()) names.push_back(e.name);
    const std::vector<int64_t> layers =
        a.layers.empty() ? std::vector<int64_t>{} : parse_int_list(a.layers, "--layers");
    for (const auto& s : names) {
      const int64_t def = optimize::default_layer(s);  // also rejects unknown names
      if (layers.empty()) {
        out.push_back(s + ":layer=" + std::to_string(def));
        continue;
      }
      const HookPoint hp = make_scorer(s)->hook_point();
      for (const int64_t l : layers)  // only the layers where the scorer can act
        if ((hp == HookPoint::kPreLlm && l == 0) || (hp == HookPoint::kInLlm && l >= 1) ||
            hp == HookPoint::kAny)
          out.push_back(s + ":layer=" + std::to_string(l));
    }
    return out;
  }
  if (!a.scorers.empty())
    throw InvalidArgument("optimize --method " + a.method +
                          ": use --scorer NAME (--scorers is for --method grid)");
  if (a.scorer.empty())
    throw InvalidArgument("optimize --method " + a.method +
                          ": name the scorer (--scorer fastv) or give --template");
  const int64_t def = optimize::default_layer(a.scorer);
  if (a.method == "budget" && !a.layers.empty()) {
    for (const int64_t l : parse_int_list(a.layers, "--layers"))
      out.push_back(a.scorer + ":layer=" + std::to_string(l));
    return out;
  }
  out.push_back(a.scorer + ":layer=" + std::to_string(a.layer >= 0 ? a.layer : def));
  return out;
}

void require_folder(const std::string& path, const std::string& flag) {
  if (flag == std::string("--model")) {
    resolve_model_source(path);  // a folder or a GGUF pair; throws the one-line error
    return;
  }
  if (!fs::exists(path)) throw IoError("optimize: " + flag + " '" + path + "' does not exist");
}

// --method dynamic-k: its own report (optimize/dynamic_k/dynamic_k.h); it needs per-sample outcomes, which
// the PlanEvaluator searches do not see.
void run_dynamic_k_cmd(const OptimizeArgs& a) {
  optimize::DynamicKOptions o;
  const auto templates = build_templates(a);
  if (templates.size() != 1)
    throw InvalidArgument("optimize --method dynamic-k: give exactly one --template");
  o.template_text = templates[0];
  if (!a.ladder.empty()) o.ladder = parse_int_list(a.ladder, "--ladder");
  if (a.epsilon_abs >= 0 && a.epsilon_given)
    throw InvalidArgument("optimize: give --epsilon (relative) or --epsilon-abs (absolute), not both");
  o.epsilon_absolute = a.epsilon_abs >= 0;
  o.epsilon = o.epsilon_absolute ? a.epsilon_abs : a.epsilon;
  o.target = a.target;
  o.confidence = a.confidence;
  o.hidden = a.hidden;
  o.training.steps = a.predictor_steps;
  if (a.limit_calib < 0 || a.limit_test < 0 || a.limit_train < 0)
    throw InvalidArgument("optimize: --limit-train, --limit-calib and --limit-test must be ≥ 0 (0 = all)");
  o.limit_train = static_cast<size_t>(a.limit_train);
  o.limit_val = static_cast<size_t>(a.limit_calib);
  o.limit_test = static_cast<size_t>(a.limit_test);
  if (a.batch < 1) throw InvalidArgument("optimize: --batch must be ≥ 1, got " + std::to_string(a.batch));
  o.batch_size = static_cast<size_t>(a.batch);
  o.store_path = a.store.empty() ? (fs::path(a.out) / "results.sqlite").string() : a.store;
  o.validate();
  if (a.train.empty())
    throw InvalidArgument(
        "optimize --method dynamic-k: --train DIR is required (fresh scenes to label: "
        "vispco data synth --seed S --count N --out DIR)");
  if (a.no_test)
    throw InvalidArgument("optimize --method dynamic-k: the test split is part of its report (no --no-test)");
  if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required");
  for (const auto& [path, flag] :
       {std::pair{a.model, "--model"}, {a.train, "--train"}, {a.calib, "--calib"}, {a.test, "--test"}})
    require_folder(path, flag);
  const ModelShape shape = load_model_shape(a.model);
  optimize::parse_auto_keep(
      o.template_text + (o.template_text.find(':') == std::string::npos ? ":" : ",") + "keep=auto", shape);
  if (!a.no_plots) optimize::check_gnuplot(a.gnuplot);
  DtypeChoice dtype_choice;
  const RunContext ctx = inference_context(a.device, a.dtype, a.threads, &dtype_choice);
  const auto log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const eval::Dataset train = eval::load_dataset(a.train), val = eval::load_dataset(a.calib),
                      test = eval::load_dataset(a.test);
  const std::string model_hash = eval::model_folder_hash(a.model);
  auto model = VisionLanguageModel::load(a.model, ctx);
  auto rep = optimize::run_dynamic_k(model, a.model, model_hash, train, val, test, o, a.out, a.no_plots, log);
  if (a.json) {
    std::cout << rep.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << rep.summary() << "wrote " << a.out << "/dynamic_k.{json,md}, predictor " << rep.predictor_path
            << " (use it: --plan " << rep.options.template_text << ",keep=auto:file=" << rep.predictor_path
            << ", or copy it to " << a.model << "/k_predictor.safetensors)\n";
  std::fprintf(stderr, "dtype: %s\n", dtype_choice.describe().c_str());
}

// --method coverage: the ε-coverage experiment (optimize/coverage_run.h) with the rule of min-k and grid.
void run_coverage_cmd(const OptimizeArgs& a) {
  optimize::CoverageRunOptions o;
  const auto templates = build_templates(a);
  if (templates.size() != 1) throw InvalidArgument("optimize --method coverage: give exactly one --template");
  o.template_text = templates[0];
  o.ladder = parse_int_list(a.ladder.empty() ? "36,64,96,128,144,192,256,288,384" : a.ladder, "--ladder");
  if (a.epsilon_abs >= 0 && a.epsilon_given)
    throw InvalidArgument("optimize: give --epsilon (relative) or --epsilon-abs (absolute), not both");
  if (a.limit_calib < 0 || a.limit_test < 0 || a.limit_train < 0 || a.coverage_draws < 1 || a.min_family_n < 1)
    throw InvalidArgument(
        "optimize --method coverage: --limit-* must be ≥ 0, --coverage-draws and --min-family-n ≥ 1");
  auto& c = o.coverage;
  c.absolute = a.epsilon_abs >= 0;
  c.epsilon = c.absolute ? a.epsilon_abs : a.epsilon;
  c.confidence = a.confidence > 0 ? a.confidence : 0.9;
  c.epsilon_per_family = a.epsilon_per_family;
  c.min_family_n = static_cast<size_t>(a.min_family_n);
  c.n_calib = a.limit_calib > 0 ? static_cast<size_t>(a.limit_calib) : 500;
  c.draws = static_cast<size_t>(a.coverage_draws);
  c.with_replacement = a.with_replacement;
  c.seed = static_cast<uint64_t>(a.seed);
  o.limit_pool = static_cast<size_t>(a.limit_train);
  o.limit_test = static_cast<size_t>(a.limit_test);
  if (a.batch < 1) throw InvalidArgument("optimize: --batch must be ≥ 1, got " + std::to_string(a.batch));
  o.batch_size = static_cast<size_t>(a.batch);
  o.store_path = a.store.empty() ? (fs::path(a.out) / "results.sqlite").string() : a.store;
  o.validate();
  if (a.train.empty())
    throw InvalidArgument("optimize --method coverage: --train DIR is required (the pool calibration subsets are "
                          "drawn from: vispco data synth --seed S --count N --out DIR)");
  if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required");
  for (const auto& [path, flag] : {std::pair{a.model, "--model"}, {a.train, "--train"}, {a.test, "--test"}})
    require_folder(path, flag);
  const ModelShape shape = load_model_shape(a.model);
  optimize::parse_auto_keep(o.template_text + (o.template_text.find(':') == std::string::npos ? ":" : ",") + "keep=auto",
                            shape);
  DtypeChoice dtype_choice;
  const RunContext ctx = inference_context(a.device, a.dtype, a.threads, &dtype_choice);
  const auto log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const eval::Dataset pool = eval::load_dataset(a.train), test = eval::load_dataset(a.test);
  const std::string model_hash = eval::model_folder_hash(a.model);
  auto model = VisionLanguageModel::load(a.model, ctx);
  auto rep = optimize::run_coverage(model, a.model, model_hash, pool, test, o, log);
  rep.inputs = {{"model", a.model}, {"model_hash", model_hash}, {"pool", a.train}, {"pool_hash", pool.hash},
                {"test", a.test},   {"test_hash", test.hash},   {"store", o.store_path},
                {"dtype", dtype_choice.describe()}};
  fs::create_directories(a.out);
  write_text_atomically((fs::path(a.out) / "coverage.json").string(),
                        rep.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_text_atomically((fs::path(a.out) / "coverage.md").string(), rep.to_markdown());
  if (a.json) {
    std::cout << rep.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << rep.summary() << "wrote " << a.out << "/coverage.{json,md}\n";
  std::fprintf(stderr, "dtype: %s\n", dtype_choice.describe().c_str());
}

void run_optimize_cmd(const OptimizeArgs& a) {
  if (a.method == "dynamic-k") return run_dynamic_k_cmd(a);
  if (a.method == "coverage") return run_coverage_cmd(a);
  optimize::OptimizeOptions o;
  o.method = a.method;
  optimize::find_search(a.method);  // unknown method: one line listing the valid ones
  if (a.epsilon_abs >= 0 && a.epsilon_given)
    throw InvalidArgument("optimize: give --epsilon (relative) or --epsilon-abs (absolute), not both");
  o.epsilon_absolute = a.epsilon_abs >= 0;
  o.epsilon = o.epsilon_absolute ? a.epsilon_abs : a.epsilon;
  o.templates = build_templates(a);
  if (!a.keep.empty()) o.keeps = parse_int_list(a.keep, "--keep");
  o.k_min = a.k_min;
  o.k_max = a.k_max;
  o.k_step = a.k_step;
  o.flops_budget = a.flops_ratio;
  o.evaluate_test = !a.no_test;
  o.confidence = a.confidence;
  o.epsilon_per_family = a.epsilon_per_family;
  o.min_family_n = a.min_family_n;
  o.min_speedup = a.min_speedup;
  o.timing_factor = a.timing_factor;
  if (a.limit_calib < 0 || a.limit_test < 0)
    throw InvalidArgument("optimize: --limit-calib and --limit-test must be ≥ 0 (0 = all)");
  if (a.batch < 1) throw InvalidArgument("optimize: --batch must be ≥ 1, got " + std::to_string(a.batch));
  o.validate();
  require_folder(a.model, "--model");
  require_folder(a.calib, "--calib");
  if (o.evaluate_test) {
    if (a.test.empty()) throw InvalidArgument("optimize: --test DIR is required (or pass --no-test)");
    require_folder(a.test, "--test");
  }
  const ModelShape shape = load_model_shape(a.model);
  o.validate(shape);  // templates, K values: before the slow steps
  if (!a.no_plots) optimize::check_gnuplot(a.gnuplot);

  DtypeChoice dtype_choice;
  const RunContext ctx = inference_context(a.device, a.dtype, a.threads, &dtype_choice);
  const auto log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };

  const eval::Dataset calib = eval::load_dataset(a.calib);
  const eval::Dataset test = o.evaluate_test ? eval::load_dataset(a.test) : calib;
  const std::string model_hash = eval::model_folder_hash(a.model);
  auto model = VisionLanguageModel::load(a.model, ctx);

  optimize::ModelEvalSettings st;
  st.limit_calib = static_cast<size_t>(a.limit_calib);
  st.limit_test = static_cast<size_t>(a.limit_test);
  st.batch_size = static_cast<size_t>(a.batch);
  st.store_path = a.store.empty() ? (fs::path(a.out) / "results.sqlite").string() : a.store;
  eval::ProgressMode pm = eval::parse_progress_mode(a.progress);
  if (pm == eval::ProgressMode::kAuto) pm = isatty(2) ? eval::ProgressMode::kBar : eval::ProgressMode::kOff;
  st.progress = a.json ? eval::ProgressMode::kOff : pm;
  st.log = log;
  st.env.model_dir = a.model;
  optimize::ModelPlanEvaluator evaluator(model, model_hash, calib, test, st);

  optimize::OptimizeReport rep = optimize::run_optimize(o, evaluator, log);
  rep.inputs = {{"model", a.model},
                {"model_hash", model_hash},
                {"calib", a.calib},
                {"calib_hash", calib.hash},
                {"limit_calib", a.limit_calib},
                {"test", o.evaluate_test ? a.test : ""},
                {"test_hash", o.evaluate_test ? test.hash : ""},
                {"limit_test", a.limit_test},
                {"store", st.store_path},
                {"dtype", dtype_choice.describe()},
                {"batch", a.batch}};
  optimize::write_report(rep, a.out);
  if (!a.no_plots) {
    rep.plots = optimize::write_plots(rep, a.out, a.gnuplot);
    optimize::write_report(rep, a.out);  // again, with the plot list
  }
  if (a.json) {
    std::cout << rep.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << rep.summary() << "wrote " << a.out << "/optimize.{json,md}"
            << (rep.plots.empty() ? "" : ", " + a.out + "/plots/*.png") << "; store " << st.store_path
            << "\n";
  std::fprintf(stderr, "dtype: %s\n",
               dtype_choice.describe().c_str());  // after success: errors stay one line
}

}  // namespace

void register_optimize(CLI::App& app) {
  auto a = std::make_shared<OptimizeArgs>();
  std::string methods;
  for (const auto& e : optimize::search_registry()) methods += "\n  " + e.name + ": " + e.description;
  methods +=
      "\n  dynamic-k: per-image K from a light MLP predictor trained on ladder labels (--train, --ladder; "
      "issue 18)"
      "\n  coverage: how often the min-k/grid rule's chosen K loses more than ε (and E per family) on --test, "
      "over --coverage-draws calibration subsets of --limit-calib samples drawn from --train (issue 46)";
  CLI::App* cmd = app.add_subcommand(
      "optimize",
      "Choose a pruning plan under a constraint on a calibration split, then evaluate it on a test split");
  cmd->add_option("--model", a->model, kModelHelp)->required();
  cmd->add_option("--calib", a->calib,
                  "Calibration dataset (data.jsonl or its folder): the search runs on it")
      ->required();
  cmd->add_option("--test", a->test,
                  "Test dataset: the chosen plan and the unpruned model are evaluated on it");
  cmd->add_option("--method", a->method, "Search:" + methods)->required();
  cmd->add_option("--scorer", a->scorer,
                  "min-k/budget: the scorer (fastv, visionzip, divprune, random, uniform, pool)");
  cmd->add_option("--layer", a->layer, "min-k/budget: the stage layer ℓ (default 2 for fastv, else 0)");
  cmd->add_option("--scorers", a->scorers, "grid: comma-separated scorers (default: all)");
  cmd->add_option(
      "--layers", a->layers,
      "grid: comma-separated layers, each scorer at those it can act at (default: its default layer); "
      "budget: the layers tried for --scorer");
  cmd->add_option(
      "--template", a->templates,
      "Plan template(s) instead of --scorer/--scorers, ';'-separated or repeated: 'fastv:layer=2', "
      "a plan with {K}, or (budget) 'pdrop:layers=2/4/6' with the ratio free");
  cmd->add_option("--train", a->train,
                  "dynamic-k: fresh scenes to label and train the K predictor on (--calib validates)");
  cmd->add_option("--ladder", a->ladder,
                  "dynamic-k: comma-separated K rungs (default 16,24,32,48,64,96,144,192,288,576)");
  cmd->add_option("--target", a->target,
                  "dynamic-k: label target: correct | agree (with the unpruned answer)")
      ->capture_default_str();
  cmd->add_option("--hidden", a->hidden, "dynamic-k: predictor hidden width")->capture_default_str();
  cmd->add_option("--predictor-steps", a->predictor_steps, "dynamic-k: predictor training steps")
      ->capture_default_str();
  cmd->add_option("--limit-train", a->limit_train, "dynamic-k: first N training samples (0 = all)")
      ->capture_default_str();
  cmd->add_option("--keep", a->keep, "grid: comma-separated K values (e.g. 576,288,192,144,96,64,32,16)");
  cmd->add_option("--epsilon", a->epsilon,
                  "Tolerated accuracy loss relative to unpruned, in [0, 1) (0.01 = 1 %)")
      ->capture_default_str();
  cmd->add_option(
      "--epsilon-abs", a->epsilon_abs,
      "Tolerated accuracy loss in absolute accuracy, in [0, 1] (0.01 = one point), instead of --epsilon");
  cmd->add_option(
         "--confidence", a->confidence,
         "min-k, grid, dynamic-k: accept a plan only when the upper confidence bound on its paired accuracy "
         "loss is within ε (e.g. 0.9; Clopper–Pearson on the samples lost and gained for 0/1 scores); 0 = "
         "point estimate")
      ->capture_default_str();
  cmd->add_option("--epsilon-per-family", a->epsilon_per_family,
                  "min-k, grid: every question family with ≥ --min-family-n calibration samples must keep its "
                  "loss within E of its own unpruned accuracy (relative, or absolute with --epsilon-abs); with "
                  "--confidence by upper bounds, Bonferroni over the families; 0 = off")
      ->capture_default_str();
  cmd->add_option("--min-family-n", a->min_family_n,
                  "min-k, grid: families with fewer calibration samples are named, not checked")
      ->capture_default_str();
  cmd->add_option("--min-speedup", a->min_speedup,
                  "min-k, grid: a pruned plan is chosen only when its measured calibration prefill speedup "
                  "(unpruned ÷ plan) is above this (1 = never slower than unpruned); 0 = off")
      ->capture_default_str();
  cmd->add_option("--timing-factor", a->timing_factor,
                  "Flag plans whose measured and FLOPs-model speedups differ by more than this factor")
      ->capture_default_str();
  cmd->add_option("--coverage-draws", a->coverage_draws, "coverage: re-drawn calibration subsets")
      ->capture_default_str();
  cmd->add_flag("--with-replacement", a->with_replacement,
                "coverage: draw each subset with replacement (a bootstrap of the pool)");
  cmd->add_option("--seed", a->seed, "coverage: seed of the draws")->capture_default_str();
  cmd->add_option("--k-min", a->k_min, "min-k: smallest K searched")->capture_default_str();
  cmd->add_option("--k-max", a->k_max, "min-k: largest K searched (0 = N_v)")->capture_default_str();
  cmd->add_option("--k-step", a->k_step, "min-k: K searched on k_min, k_min + step, …, and k_max")
      ->capture_default_str();
  cmd->add_option("--flops-ratio", a->flops_ratio, "budget: largest allowed LLM FLOPs ratio, in (0, 1]");
  cmd->add_option("--limit-calib", a->limit_calib, "First N calibration samples (0 = all)")
      ->capture_default_str();
  cmd->add_option("--limit-test", a->limit_test, "First N test samples (0 = all)")->capture_default_str();
  cmd->add_option("--batch", a->batch, "Samples per generate() call")->capture_default_str();
  cmd->add_option("--out", a->out, "Report folder (optimize.json, optimize.md, plots/)")
      ->capture_default_str();
  cmd->add_option("--store", a->store, "SQLite result store (default: <out>/results.sqlite)");
  add_compute_flags(cmd, &a->dtype, &a->device, &a->threads);
  cmd->add_option("--progress", a->progress, "Per-evaluation progress on stderr: auto | bar | lines | off")
      ->capture_default_str();
  cmd->add_option("--gnuplot", a->gnuplot, "gnuplot program")->capture_default_str();
  cmd->add_flag("--no-test", a->no_test, "Do not evaluate on a test split");
  cmd->add_flag("--no-plots", a->no_plots, "Do not draw plots (no gnuplot needed)");
  cmd->add_flag("--json", a->json, "Print the report as one JSON object");
  cmd->callback([a, cmd] {
    OptimizeArgs args = *a;
    args.epsilon_given = cmd->count("--epsilon") > 0;
    run_optimize_cmd(args);
  });
}

}  // namespace vispco::cli
