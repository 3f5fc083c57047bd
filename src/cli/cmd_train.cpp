// `vispco train`: trains (or resumes training of) the bundled SynthVQA model from a recipe and exports it.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "cost/timer.h"
#include "train/trainer.h"

namespace vispco::cli {

void register_train(CLI::App& app) {
  struct Opts {
    std::string recipe, out, export_dir, device = "cpu";
    double max_minutes = 0;
    int threads = 0;
    bool export_only = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("train", "Train the bundled SynthVQA model (resumes from <out>/checkpoint)");
  cmd->add_option("--recipe", o->recipe, "Training recipe JSON (e.g. configs/synthvqa-small.json)")
      ->required();
  cmd->add_option("--out", o->out, "Run folder: tokenizer, checkpoint, logs")->required();
  cmd->add_option("--export", o->export_dir,
                  "Model folder to write when training completes (default <out>/model)");
  cmd->add_option("--max-minutes", o->max_minutes,
                  "Stop (with a checkpoint) after this many minutes; 0 = no limit")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Intra-op threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--device", o->device,
                  "cpu | cuda[:N] (fp32 either way; a checkpoint written on one device resumes on another)")
      ->capture_default_str();
  cmd->add_flag("--export-now", o->export_only,
                "Export the current checkpoint's weights even if training is unfinished");
  cmd->callback([o] {
    RunContext ctx;
    ctx.n_threads = o->threads;
    ctx.device = parse_device(o->device);
    apply_threads(ctx);
    auto recipe = train::load_recipe(o->recipe);
    train::Trainer trainer(recipe, o->out, ctx);
    const std::string export_dir = o->export_dir.empty() ? o->out + "/model" : o->export_dir;
    Stopwatch wall;
    double ema = -1;
    const bool done =
        o->export_only ? trainer.done() : trainer.run(o->max_minutes * 60.0, [&](const train::StepReport& r) {
          ema = ema < 0 ? r.loss : 0.95 * ema + 0.05 * r.loss;
          const double eta_min =
              (r.steps - r.step) * (wall.ms() / 1000.0 / std::max<int64_t>(1, r.step)) / 60.0;
          std::string parts;
          if (r.stage != "vision") {
            char buf[160];
            std::snprintf(buf, sizeof buf,
                          " [token %.3f ground %.3f answer %.3f readout %.4f glyph %.3f glyph-value %.3f]",
                          r.token_loss, r.grounding_loss, r.answer_loss, r.readout_loss, r.glyph_loss,
                          r.glyph_value_loss);
            parts = buf;
          }
          std::fprintf(stderr, "[%s %ld/%ld] loss %.4f (ema %.4f)%s lr %.2e %.1f img/s elapsed %.1f min\n",
                       r.stage.c_str(), (long)r.step, (long)r.steps, r.loss, ema, parts.c_str(), r.lr,
                       r.samples_per_s, wall.ms() / 60000.0);
          (void)eta_min;
        });
    if (!trainer.stopped_by_probe().empty() && !o->export_only)
      throw Error(trainer.stopped_by_probe() + "; the checkpoint is kept (--export-now writes its weights)");
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
