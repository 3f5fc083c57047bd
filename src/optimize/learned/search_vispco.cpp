// `vispco optimize --method vispco` (also `vispco vispco-search`), the registry row (search_method.h): VisPCO
// (Ji et al., ACL 2026, arXiv 2604.15188) — learn a budget-conditioned predictor of per-layer pruning plans
// on the frozen model (optionally data-parallel over c10d Gloo processes), save it, evaluate it at each
// budget on a test split through the normal pruning path, and write the curve (JSON, CSV, Markdown, gnuplot).
// Every flag's help states its default and, where the paper fixes one, the paper's value.
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/context.h"
#include "core/errors.h"
#include "cost/timer.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "model/vlm.h"
#include "optimize/learned/ddp.h"
#include "optimize/learned/evaluate.h"
#include "optimize/learned/options.h"
#include "optimize/learned/report.h"
#include "optimize/learned/trainer.h"
#include "optimize/search_flags.h"
#include "optimize/searches.h"
#include "optimize/sweep_group.h"

namespace vispco::optimize {
namespace {

struct PcoArgs {
  // The search's settings, flags bound to its members: their defaults are SearchOptions' (options.h).
  learned::SearchOptions o;
  std::string kernel = learned::kernel_name(o.kernel.kind);
  std::string floor = learned::budget_floor_name(o.floor);
  std::string model, data, out = "vispco_out";
  std::string budgets = "0.1,0.2,0.3,0.4,0.5", train_budgets, predictor, store, grid_frontier, label;
  std::string dtype = "auto", device = "cpu", master_addr = "127.0.0.1";
  int64_t world_size = 1, rank = 0, master_port = 29500, eval_limit = 0, eval_batch = 8;
  double ddp_timeout = 300;
  int threads = 0;
  bool skip_eval = false, no_plots = false, keep_last_epoch = false, no_projection = false;
  // Set when the flag was given: an explicit --min-epochs above --epochs (or --min-lr above --lr) is an
  // error; only the defaults follow a smaller --epochs / --lr.
  bool min_epochs_given = false, min_lr_given = false;
};

std::vector<double> parse_list(const std::string& text, const std::string& flag) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    char* end = nullptr;
    const double v = std::strtod(cell.c_str(), &end);
    if (cell.empty() || end == cell.c_str() || *end != '\0')
      throw InvalidArgument(flag + " must be comma-separated numbers, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw InvalidArgument(flag + " must not be empty");
  return out;
}

learned::SearchOptions search_options(const PcoArgs& a) {
  learned::SearchOptions o = a.o;
  o.kernel.kind = learned::kernel_kind(a.kernel);
  o.floor = learned::parse_budget_floor(a.floor);
  if (!a.train_budgets.empty()) o.train_budgets = parse_list(a.train_budgets, "--train-budgets");
  if (!a.min_epochs_given) o.min_epochs = std::min(o.min_epochs, o.max_epochs);
  if (!a.min_lr_given) o.min_lr = std::min(o.min_lr, o.lr);
  o.restore_best = !a.keep_last_epoch;
  o.validate();
  return o;
}

void run_search(const PcoArgs& a, std::ostream& out) {
  namespace fs = std::filesystem;
  learned::DdpOptions dd;
  dd.world_size = a.world_size;
  dd.rank = a.rank;
  dd.master_addr = a.master_addr;
  dd.master_port = a.master_port;
  dd.timeout_s = a.ddp_timeout;
  dd.validate();
  auto opts = search_options(a);
  learned::BudgetEvalOptions eo;
  eo.budgets = parse_list(a.budgets, "--budgets");
  if (a.eval_limit < 0)
    throw InvalidArgument("--eval-limit must be ≥ 0, got " + std::to_string(a.eval_limit));
  if (a.eval_batch < 1)
    throw InvalidArgument("--eval-batch must be ≥ 1, got " + std::to_string(a.eval_batch));
  eo.limit = static_cast<size_t>(a.eval_limit);
  eo.batch = static_cast<size_t>(a.eval_batch);
  eo.project = !a.no_projection;
  eo.env = ScorerEnv{a.model};
  eo.store_path = a.store.empty() ? (fs::path(a.out) / "results.sqlite").string() : a.store;
  eo.validate();
  const bool evaluate = !a.skip_eval && dd.rank == 0;
  if (evaluate && a.data.empty()) throw InvalidArgument("--data is required unless --skip-eval");
  learned::GridFrontier grid;
  if (!a.grid_frontier.empty()) grid = learned::read_grid_frontier(a.grid_frontier);  // before the slow steps
  if (!a.predictor.empty() && a.world_size > 1)
    throw InvalidArgument("--predictor loads a trained predictor; it takes no --world-size > 1");

  DtypeChoice dtype_choice;
  RunContext ctx = inference_context(a.device, a.dtype, a.threads, &dtype_choice);
  ctx.seed = a.o.seed;
  // Dropout draws of g_φ (LibTorch's default generator), one stream per rank.
  torch::manual_seed(a.o.seed + static_cast<uint64_t>(a.rank));

  eval::Dataset ds;
  if (evaluate) ds = eval::load_dataset(a.data);  // before the slow steps: a bad path fails at once
  auto model = VisionLanguageModel::load(a.model, ctx);
  learned::SearchReport rep;
  rep.model = a.model;
  rep.data = a.data;
  rep.world_size = a.world_size;
  rep.label = a.label;
  rep.grid = grid;

  learned::Predictor predictor{nullptr};
  if (!a.predictor.empty()) {
    nlohmann::json meta;
    predictor = learned::load_predictor(a.predictor, &meta);
    if (meta.contains("search")) opts = learned::search_options_from_json(meta["search"]);
    predictor->to(ctx.device);
  } else {
    learned::DataParallel ddp(dd);
    learned::SearchTrainer trainer(model, opts, ddp);
    std::unique_ptr<std::ofstream> log;
    if (ddp.is_main()) {
      fs::create_directories(a.out);
      log = std::make_unique<std::ofstream>(fs::path(a.out) / "train_log.jsonl");
    }
    std::fprintf(stderr, "vispco-search: rank %ld/%ld, caching the teacher on %ld samples…\n", (long)a.rank,
                 (long)a.world_size, (long)opts.n_train);
    rep.training = trainer.run([&](const learned::EpochReport& e) {
      std::fprintf(
          stderr,
          "epoch %3ld  steps %4ld  KL %.5f  |c| train %.4f  val %.4f (mean %+.4f)  mu %.3g%s  λ [%.3g, %.3g]"
          "  %.1f s%s\n",
          (long)e.epoch, (long)e.steps, e.train_kl, e.train_abs_c, e.val_abs_c, e.val_mean_c, e.mu,
          e.mu_grew ? "↑" : "", e.lambda_min, e.lambda_max, e.seconds, e.converged ? "  converged" : "");
      if (log) *log << e.to_json().dump() << "\n" << std::flush;
    });
    predictor = trainer.predictor();
    std::fprintf(stderr, "vispco-search: predictor of epoch %ld kept (validation mean|c| %.4f%s)\n",
                 (long)rep.training.selected_epoch, rep.training.selected_val_abs_c,
                 opts.restore_best ? ", the lowest" : ", the last epoch");
    if (ddp.is_main()) {
      nlohmann::json meta = {{"search", learned::to_json(opts)},
                             {"training", rep.training.to_json()},
                             {"lagrangian", trainer.lagrangian().state_json()},
                             {"model", a.model},
                             {"ddp", learned::to_json(dd)}};
      learned::save_predictor(a.out, predictor, meta);
      std::fprintf(
          stderr,
          "vispco-search: predictor saved to %s/predictor.{pt,json} (teacher %.1f s, training %.1f s)\n",
          a.out.c_str(), rep.training.teacher_seconds, rep.training.train_seconds);
    }
    ddp.barrier();
  }
  rep.options = opts;
  if (dd.rank != 0) return;
  if (evaluate) {
    Stopwatch sw;
    rep.points = learned::evaluate_budgets(
        model, eval::model_folder_hash(a.model), predictor, opts, ds, eo,
        [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); });
    rep.eval_seconds = sw.ms() / 1000.0;
  }
  const auto png = learned::write_search_outputs(rep, a.out, a.no_plots ? "" : "gnuplot");
  out << rep.to_markdown();
  out << "\nwrote " << a.out << "/{curve.json, curve.csv, summary.md"
      << (rep.points.empty() ? "" : ", curve.gp") << (png.empty() ? "" : ", curve.png") << "}\n";
  std::fprintf(stderr, "dtype: %s\n",
               dtype_choice.describe().c_str());  // after success: errors stay one line
}

class VisPcoMethod final : public SearchMethod {
 public:
  void add_flags(SearchFlags& flags) override {
    PcoArgs& a = a_;
    flags.option("--model", &a.model, kModelFlagHelp);
    flags.require("--model");
    flags.option("--data", &a.data, "Test split (data.jsonl or folder) evaluated at each budget");
    flags
        .option("--out", &a.out,
                "Output folder: predictor.{pt,json}, train_log.jsonl, curve.{json,csv,gp,png}, "
                "summary.md, results.sqlite")
        ->capture_default_str();
    flags
        .option(
            "--scorer", &a.o.scorer,
            "Token scorer from the registry that can score a teacher-forced training forward: fastv (paper) "
            "or random")
        ->capture_default_str();
    flags
        .option(
            "--first-layer", &a.o.first_layer,
            "First decoder layer whose input may be pruned; 0 = the scorer's earliest (fastv: 1). FastV's "
            "paper prunes from layer 2; the release from the earliest")
        ->capture_default_str();
    flags
        .option("--kernel", &a.kernel,
                "Keep-fraction kernel: step | ramp | multistep (release: step; paper "
                "reports multistep better)")
        ->capture_default_str();
    flags.option("--stages", &a.o.kernel.n_stages, "Steps S of the multistep kernel, 1–8")
        ->capture_default_str();
    flags
        .option("--gamma", &a.o.kernel.gamma,
                "Sigmoid sharpness γ of the step kernels, per layer (release: 10)")
        ->capture_default_str();
    flags
        .option("--budgets", &a.budgets,
                "Budgets b ∈ (0, 1] evaluated on --data; T(b) = F_min + b·(F_max − F_min)")
        ->capture_default_str();
    flags.option("--train-budgets", &a.train_budgets,
                 "Budgets drawn in training (default = release: 0.01,0.05,0.10,…,0.95)");
    flags
        .option("--floor", &a.floor,
                "Budget zero F_min: scorer (cheapest plan the scorer reaches) | text "
                "(paper: text tokens only)")
        ->capture_default_str();
    flags.option("--train-seed", &a.o.train_seed, "SynthVQA seed of the training set (≠ calib/test)")
        ->capture_default_str();
    flags.option("--n-train", &a.o.n_train, "Training samples (release: 10k LLaVA-Instruct)")
        ->capture_default_str();
    flags.option("--val-seed", &a.o.val_seed, "SynthVQA seed of the validation split")->capture_default_str();
    flags.option("--n-val", &a.o.n_val, "Validation samples for the multiplier updates")
        ->capture_default_str();
    flags.option("--batch", &a.o.batch, "Samples per step and process (release: 2 per GPU × 8)")
        ->capture_default_str();
    flags.option("--epochs", &a.o.max_epochs, "Most epochs (release: 1000)")->capture_default_str();
    flags
        .option("--min-epochs", &a.o.min_epochs,
                "Epochs before the stopping rule may fire, ≤ --epochs (default: 5 or --epochs when fewer; "
                "release: 5)")
        ->capture_default_str();
    flags.option("--lr", &a.o.lr, "AdamW learning rate of g_φ (release: 1e-4)")->capture_default_str();
    flags
        .option(
            "--min-lr", &a.o.min_lr,
            "Cosine schedule's final learning rate, ≤ --lr (default: 1e-5 or --lr when lower; release: 1e-6)")
        ->capture_default_str();
    flags.option("--warmup", &a.o.warmup, "Warm-up fraction of all steps (release: 0.001)")
        ->capture_default_str();
    flags.option("--weight-decay", &a.o.weight_decay, "AdamW weight decay (release: 1e-4)")
        ->capture_default_str();
    flags.option("--kl-weight", &a.o.kl_weight, "Weight of the KL distillation term (release: 1000)")
        ->capture_default_str();
    flags.option("--clip", &a.o.clip, "Gradient-norm clip, 0 = off (release: off)")->capture_default_str();
    flags.option("--dropout", &a.o.dropout, "Dropout of g_φ (release: 0.1)")->capture_default_str();
    flags.option("--seed", &a.o.seed, "Seed of g_φ's weights, data order and dropout")->capture_default_str();
    flags.flag("--keep-last-epoch", &a.keep_last_epoch,
               "Keep g_φ's last-epoch weights instead of the epoch with the lowest validation mean|c| "
               "(release: last)");
    flags.option("--threshold-width", &a.o.threshold.width, "Rank window of the soft threshold (release: 5)")
        ->capture_default_str();
    flags
        .option("--temperature", &a.o.threshold.temperature,
                "Temperature τ of the sigmoid mask (release: 0.1)")
        ->capture_default_str();
    flags
        .option("--al-lambda0", &a.o.al.lambda0,
                "Initial multipliers λ₀ (release: w = 1, TFLOPs units, ×0.1)")
        ->capture_default_str();
    flags
        .option("--al-mu0", &a.o.al.mu0,
                "Initial penalty μ₀ on the normalised constraint (release: σ = 100 on TFLOPs, ≈ 5000 in "
                "these units for LLaVA-7B)")
        ->capture_default_str();
    flags
        .option("--al-growth", &a.o.al.growth,
                "Penalty growth α (release: 5 in its run script, 2 in main.py)")
        ->capture_default_str();
    flags.option("--al-mu-max", &a.o.al.mu_max, "Ceiling of μ (release: none)")->capture_default_str();
    flags.option("--al-beta", &a.o.al.beta, "Sufficient-decrease ratio β (release: 0.5)")
        ->capture_default_str();
    flags
        .option("--al-epsilon", &a.o.al.epsilon,
                "Stop when validation mean|c| < ε (normalised; release: 0.01 TFLOPs)")
        ->capture_default_str();
    flags.option("--al-patience", &a.o.al.patience, "Epochs in a row under ε to stop (release: 3)")
        ->capture_default_str();
    flags
        .option(
            "--world-size", &a.world_size,
            "Data-parallel processes (c10d Gloo); under a launcher (torchrun, srun, mpirun) its variables "
            "set this, --rank, --master-addr and --master-port (a flag given too must agree)")
        ->capture_default_str();
    flags.option("--rank", &a.rank, "This process's rank; rank 0 hosts the TCPStore and writes the outputs")
        ->capture_default_str();
    flags.option("--master-addr", &a.master_addr, "Address of rank 0's TCPStore")->capture_default_str();
    flags.option("--master-port", &a.master_port, "Port of rank 0's TCPStore")->capture_default_str();
    flags.option("--ddp-timeout", &a.ddp_timeout, "Rendezvous/collective timeout, seconds")
        ->capture_default_str();
    flags.option("--predictor", &a.predictor, "Skip training: load predictor.{pt,json} from this folder");
    flags.option("--eval-limit", &a.eval_limit, "Evaluate only the first N test samples (0 = all)")
        ->capture_default_str();
    flags.option("--eval-batch", &a.eval_batch, "Samples per generate() call in evaluation")
        ->capture_default_str();
    flags.option("--store", &a.store, "SQLite result store (default: <out>/results.sqlite)");
    flags.option("--grid-frontier", &a.grid_frontier,
                 "Grid frontier to overlay and compare wall time with: the optimize.json of `vispco optimize "
                 "--method grid`, or a CSV 'flops_ratio,accuracy'");
    flags.option("--label", &a.label, "Text shown in the summary and plot title (e.g. 'random weights')");
    flags.option("--dtype", &a.dtype, "Compute dtype of the VLM: fp32 | bf16 (g_φ is always fp32)")
        ->capture_default_str();
    flags.option("--device", &a.device, "cpu | cuda[:N]")->capture_default_str();
    flags
        .option("--threads", &a.threads,
                "Intra-op threads per process (0 = the CPUs this process may use: affinity, cgroup quota)")
        ->capture_default_str();
    flags.flag("--skip-eval", &a.skip_eval, "Train and save the predictor only");
    flags.flag(
        "--no-budget-projection", &a.no_projection,
        "Evaluate the predicted keep fractions as they are instead of projecting them onto each budget "
        "(R → R^α with A = T(b)); the paper's setting");
    flags.flag("--no-plots,--no-plot", &a.no_plots,
               "Do not run gnuplot (the script is still written; --no-plot is the old spelling)");
  }

  void run(const SearchFlags& flags, std::ostream& out) override {
    a_.min_epochs_given = flags.given("--min-epochs");
    a_.min_lr_given = flags.given("--min-lr");
    take_launch(flags, launch_from_environment().env);
    run_search(a_, out);
  }

 private:
  // Under a launcher (torchrun, srun, mpirun; core/launcher_env.h) the group comes from its variables: RANK,
  // WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and cuda → cuda:LOCAL_RANK). A flag given as well must agree.
  // Without launcher variables the flags stand, as before. @throws InvalidArgument for a disagreeing flag.
  void take_launch(const SearchFlags& flags, const LauncherEnv& env) {
    if (!env.distributed()) return;
    PcoArgs& a = a_;
    const auto agree = [&](const char* flag, const std::string& given, const std::string& launched,
                           const char* variable) {
      if (flags.given(flag) && given != launched)
        throw InvalidArgument(std::string("vispco-search: ") + flag + " " + given + " disagrees with the " +
                              env.launcher + " launch's " + variable + "=" + launched +
                              " (under a launcher give neither, or the same value)");
    };
    agree("--world-size", std::to_string(a.world_size), std::to_string(env.world_size), "world size");
    agree("--rank", std::to_string(a.rank), std::to_string(env.rank), "rank");
    agree("--master-addr", a.master_addr, env.master_addr, "MASTER_ADDR");
    agree("--master-port", std::to_string(a.master_port), std::to_string(env.master_port), "MASTER_PORT");
    a.world_size = env.world_size;
    a.rank = env.rank;
    a.master_addr = env.master_addr;
    a.master_port = env.master_port;
    a.device = rank_device(a.device, env);
  }

  PcoArgs a_;
};

}  // namespace

std::unique_ptr<SearchMethod> make_vispco_method() { return std::make_unique<VisPcoMethod>(); }

}  // namespace vispco::optimize
