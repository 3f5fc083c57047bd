// `vispco finetune`: prune-then-fine-tune a model for one pruning plan (train/finetune.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/progress.h"
#include "model/family.h"
#include "model/model_source.h"
#include "optimize/sweep_group.h"
#include "prune/bound_plan.h"
#include "train/finetune.h"

namespace vispco::cli {

std::string plan_for_model(const std::string& model_dir, const std::string& given, bool given_explicitly) {
  const std::string tuned = tuned_plan_of(model_dir);
  if (given_explicitly) {
    if (!tuned.empty() && given != tuned)
      std::fprintf(stderr, "warning: %s was fine-tuned for the plan %s; running %s\n", model_dir.c_str(),
                   tuned.c_str(), given.c_str());
    return given;
  }
  if (tuned.empty()) return given;
  std::fprintf(stderr, "plan: %s (the plan %s was fine-tuned for; --plan none runs it unpruned)\n",
               tuned.c_str(), model_dir.c_str());
  return tuned;
}

void register_finetune(CLI::App& app) {
  struct Args {
    std::string model, plan, out, val, test;
    train::FinetuneOptions o;
    int threads = 0;
    std::string progress = "auto";
    double epochs = 0;
    int64_t stop_at_step = 0;
    optimize::SweepFlags sweep;  // --dist-timeout only: finetune shares gradients, not work items
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "finetune", "Fine-tune a model with a pruning plan applied in training (prune-then-fine-tune)");
  cmd->add_option("--model", a->model, kModelHelp)->required();
  cmd->add_option("--plan", a->plan,
                  "The pruning plan to tune for (selection-only stages, e.g. fastv:layer=2,keep=32)")
      ->required();
  cmd->add_option("--out", a->out, "Run folder: checkpoint/, model/ (the tuned model), finetune.{json,md}")
      ->required();
  cmd->add_option("--val", a->val, "Validation dataset (early stopping on accuracy with the plan)")
      ->required();
  cmd->add_option("--test", a->test,
                  "Test dataset: per-family accuracy before and after, with the plan and unpruned");
  cmd->add_option("--train", a->o.train, "What trains: projector | projector+decoder | decoder-last-N")
      ->capture_default_str();
  cmd->add_option("--steps", a->o.steps, "Most optimiser steps")->capture_default_str();
  cmd->add_option("--epochs", a->epochs, "Instead of --steps: passes over --train-scenes scenes")
      ->excludes("--steps");
  cmd->add_option("--stop-at-step", a->stop_at_step,
                  "Stop after this step with a checkpoint (0 = run to the end); running again without it "
                  "resumes there, on the schedule of --steps")
      ->capture_default_str();
  add_count_option(cmd, "--train-scenes", &a->o.train_scenes,
                   "Training-scene pool size (0 = a fresh scene every time)");
  cmd->add_option("--batch", a->o.batch, "(image, question) pairs per step")->capture_default_str();
  cmd->add_option("--lr", a->o.lr, "Peak learning rate (warm-up, cosine to 10 %)")->capture_default_str();
  cmd->add_option("--weight-decay", a->o.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--val-every", a->o.val_every, "Validate every N steps")->capture_default_str();
  add_count_option(cmd, "--val-limit", &a->o.val_limit, "First N validation samples (0 = all)");
  add_count_option(cmd, "--test-limit", &a->o.test_limit, "First N test samples (0 = all)");
  cmd->add_option("--patience", a->o.patience, "Stop after P validations without a new best")
      ->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Seed")->capture_default_str();
  cmd->add_option("--data-seed", a->o.data_seed,
                  "SynthVQA seed of the training scenes (disjoint from calib/test)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads,
                  "Intra-op threads (0 = the CPUs this process may use: affinity, cgroup quota)")
      ->capture_default_str();
  cmd->add_option("--progress", a->progress, "Progress of the training steps: auto|bar|lines|off")
      ->capture_default_str();
  cmd->add_option("--dist-timeout", a->sweep.dist_timeout_s,
                  "Under a launcher (data-parallel): seconds to wait for the rendezvous at "
                  "MASTER_ADDR:MASTER_PORT and for any collective (longer than one validation check)")
      ->capture_default_str();
  cmd->callback([a] {
    if (a->epochs != 0) {
      if (!(a->epochs > 0) || a->o.train_scenes == 0)
        throw InvalidArgument(
            "finetune: --epochs needs a positive value and --train-scenes N (the pool an epoch covers)");
      a->o.steps = static_cast<int64_t>(
          std::ceil(a->epochs * static_cast<double>(a->o.train_scenes) / static_cast<double>(a->o.batch)));
    }
    if (resolve_model_source(a->model).is_gguf())
      throw InvalidArgument(
          "finetune: --model must be a Hugging Face folder (the tuned model is written as one); '" +
          a->model + "' is a GGUF pair");
    const ModelShape shape = load_model_shape(a->model);
    a->o.plan = BoundPlan::bind(a->plan, shape, ScorerEnv{a->model}).text();  // canonical, checked early
    a->o.validate();
    // Under a launcher (torchrun, srun, mpirun): data-parallel over the launch's Gloo group (finetune.h);
    // rank 0 validates, tests and writes, so it alone reads --val and --test. Checked before the
    // rendezvous, and joined before the slow steps: a bad address fails fast.
    const optimize::LaunchFromEnvironment launch = optimize::launch_from_environment();
    train::check_batch_covers_ranks(a->o.batch, launch.env.world_size);
    const bool main_rank = launch.env.rank == 0;
    eval::Dataset val;
    std::unique_ptr<eval::Dataset> test;
    if (main_rank) {
      val = eval::load_dataset(a->val);
      if (!a->test.empty()) test = std::make_unique<eval::Dataset>(eval::load_dataset(a->test));
    }
    const auto group = optimize::SweepGroup::join(launch.env, a->sweep);
    const std::string prefix = group ? group->sharing().log_prefix() : "";
    auto mode = eval::parse_progress_mode(a->progress);
    if (!main_rank) mode = eval::ProgressMode::kOff;
    const bool bar =
        mode == eval::ProgressMode::kBar || (mode == eval::ProgressMode::kAuto && isatty(fileno(stderr)));
    // A log line first clears a progress bar drawn in place, which redraws on its next step.
    const auto log = [bar, prefix](const std::string& l) {
      std::fprintf(stderr, "%s%s%s\n", bar ? "\r\033[K" : "", prefix.c_str(), l.c_str());
    };
    const auto rep = train::run_finetune(a->model, val, test.get(), a->o, a->out, a->threads, log, mode,
                                         group ? &group->group() : nullptr, a->stop_at_step);
    if (!main_rank) return;  // rank 0 wrote the model and the report
    if (rep.paused) {
      std::cout << rep.stopped << ": checkpoint " << a->out << "/checkpoint\n";
      return;
    }
    std::cout << "tuned for " << rep.options.plan << ": best validation accuracy " << rep.best_val_accuracy
              << " at step " << rep.best_step << " (" << rep.stopped << "); model " << a->out
              << "/model, report " << a->out << "/finetune.md\n";
  });
}

}  // namespace vispco::cli
