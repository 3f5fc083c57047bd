// The shared flags and step loop of the training commands (see train_driver.h).
#include "cli/train_driver.h"

#include <cstdio>
#include <iostream>

#include "core/errors.h"
#include "cost/timer.h"

namespace vispco::cli {

void add_train_flags(CLI::App* cmd, TrainFlags& f, const std::string& what) {
  cmd->add_option("--out", f.out, "Run folder: " + what)->required();
  cmd->add_option("--export", f.export_dir,
                  "Model folder to write when training completes (default <out>/model)");
  cmd->add_option("--max-minutes", f.max_minutes,
                  "Stop (with a checkpoint) after this many minutes; 0 = no limit")
      ->capture_default_str();
  cmd->add_option("--threads", f.threads,
                  "Intra-op threads (0 = the CPUs this process may use: affinity, cgroup quota)")
      ->capture_default_str();
  cmd->add_option("--device", f.device,
                  "cpu | cuda[:N] (fp32 either way; a checkpoint written on one device resumes on another)")
      ->capture_default_str();
  cmd->add_flag("--export-now", f.export_only,
                "Export the current checkpoint's weights even if training is unfinished");
}

RunContext train_context(const TrainFlags& f) {
  RunContext ctx;
  ctx.n_threads = f.threads;
  ctx.device = parse_device(f.device);
  apply_threads(ctx);
  return ctx;
}

void drive_training(train::TrainingRun& run, const TrainFlags& f) {
  const std::string export_dir = f.export_dir.empty() ? f.out + "/model" : f.export_dir;
  Stopwatch wall;
  double ema = -1;
  const bool done =
      f.export_only ? run.done() : run.run(f.max_minutes * 60.0, [&](const train::StepReport& r) {
        ema = ema < 0 ? r.loss : 0.95 * ema + 0.05 * r.loss;
        std::string parts;
        if (r.stage.rfind("decoder", 0) == 0) {  // `vispco train`'s decoder stages: the parts of the loss
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        " [token %.3f ground %.3f answer %.3f readout %.4f glyph %.3f glyph-value %.3f]",
                        r.token_loss, r.grounding_loss, r.answer_loss, r.readout_loss, r.glyph_loss,
                        r.glyph_value_loss);
          parts = buf;
        } else if (r.stage ==
                   "hr-decoder") {  // `vispco train-hr`'s decoder stage: token and answer grounding
          char buf[64];
          std::snprintf(buf, sizeof buf, " [token %.3f answer %.3f]", r.token_loss, r.answer_loss);
          parts = buf;
        }
        std::fprintf(stderr, "[%s %ld/%ld] loss %.4f (ema %.4f)%s lr %.2e %.1f img/s elapsed %.1f min\n",
                     r.stage.c_str(), (long)r.step, (long)r.steps, r.loss, ema, parts.c_str(), r.lr,
                     r.samples_per_s, wall.ms() / 60000.0);
      });
  if (!run.stopped_by_probe().empty() && !f.export_only)
    throw Error(run.stopped_by_probe() + "; the checkpoint is kept (--export-now writes its weights)");
  if (done || f.export_only) {
    run.export_model(export_dir, c10::kBFloat16);
    std::cout << (done ? "training complete; " : "training unfinished; ") << "model written to " << export_dir
              << "\n";
  } else {
    std::cout << "stopped after " << f.max_minutes << " min; run the same command to resume\n";
  }
}

}  // namespace vispco::cli
