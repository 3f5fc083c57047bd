// `vispco train-hr`: trains (or resumes training of) the bundled high-resolution LLaVA-NeXT model on
// SynthVQA-HR from an HR recipe (train/hr/hr_recipe.h) and exports it.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "cost/timer.h"
#include "train/hr/hr_trainer.h"

namespace vispco::cli {

void register_train_hr(CLI::App& app) {
  struct Opts {
    std::string recipe, base = "models/synthvqa-small", out, export_dir, device = "cpu";
    double max_minutes = 0;
    int threads = 0;
    bool export_only = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "train-hr",
      "Train the bundled high-resolution LLaVA-NeXT model on SynthVQA-HR (resumes from <out>/checkpoint)");
  cmd->add_option("--recipe", o->recipe, "HR recipe JSON (e.g. configs/hr/synthvqa-hr.json)")->required();
  cmd->add_option("--base", o->base, "LLaVA-1.5 model folder whose weights start the run (fresh runs only)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Run folder: init model, checkpoint, probes")->required();
  cmd->add_option("--export", o->export_dir,
                  "Model folder to write when training completes (default <out>/model)");
  cmd->add_option("--max-minutes", o->max_minutes,
                  "Stop (with a checkpoint) after this many minutes; 0 = no limit")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Intra-op threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu | cuda[:N] (fp32 either way)")->capture_default_str();
  cmd->add_flag("--export-now", o->export_only,
                "Export the current checkpoint's weights even if training is unfinished");
  cmd->callback([o] {
    RunContext ctx;
    ctx.n_threads = o->threads;
    ctx.device = parse_device(o->device);
    apply_threads(ctx);
    train::HrTrainer trainer(train::load_hr_recipe(o->recipe), o->base, o->out, ctx);
    const std::string export_dir = o->export_dir.empty() ? o->out + "/model" : o->export_dir;
    Stopwatch wall;
    double ema = -1;
    const bool done =
        o->export_only ? trainer.done() : trainer.run(o->max_minutes * 60.0, [&](const train::StepReport& r) {
          ema = ema < 0 ? r.loss : 0.95 * ema + 0.05 * r.loss;
          std::fprintf(stderr, "[%s %ld/%ld] loss %.4f (ema %.4f) lr %.2e %.2f img/s elapsed %.1f min\n",
                       r.stage.c_str(), (long)r.step, (long)r.steps, r.loss, ema, r.lr, r.samples_per_s,
                       wall.ms() / 60000.0);
        });
    if (done || o->export_only) {
      trainer.export_model(export_dir, c10::kBFloat16);
      std::cout << (done ? "training complete; " : "training unfinished; ") << "model written to "
                << export_dir << "\n";
    } else {
      std::cout << "stopped after " << o->max_minutes << " min; run the same command to resume\n";
    }
  });
}

}  // namespace vispco::cli
