// The flags and the step loop every training command shares (`vispco train`, `vispco train-hr`): run folder,
// export folder, time limit, threads, device, --export-now; one progress line per step on stderr; export when
// training completes.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "core/context.h"
#include "train/training_run.h"

namespace vispco::cli {

/// The shared flags of a training command.
struct TrainFlags {
  std::string out;         ///< run folder (checkpoint, logs)
  std::string export_dir;  ///< model folder written on completion ("" = <out>/model)
  std::string device = "cpu";
  double max_minutes = 0;    ///< stop with a checkpoint after this many minutes, 0 = no limit
  int threads = 0;           ///< intra-op threads, 0 = the CPUs this process may use (core/cpu_quota.h)
  bool export_only = false;  ///< export the checkpoint's weights without training
};

/// Adds --out (required), --export, --max-minutes, --threads, --device and --export-now to `cmd`.
/// @param what the run folder's contents, for --out's help.
void add_train_flags(CLI::App* cmd, TrainFlags& flags, const std::string& what);

/// The run context of the flags (threads applied). @throws InvalidArgument for a bad --device.
RunContext train_context(const TrainFlags& flags);

/// Runs `run` as the flags say: steps until done or --max-minutes (one line per step on stderr), or with
/// --export-now only exports; when done (or with --export-now) writes the model in bf16 and says where on
/// stdout, else says how to resume. @throws Error when a probe gate stopped the run (the checkpoint is kept).
void drive_training(train::TrainingRun& run, const TrainFlags& flags);

}  // namespace vispco::cli
