// `vispco train-hr`: trains (or resumes training of) the bundled high-resolution LLaVA-NeXT model on
// SynthVQA-HR from an HR recipe (train/hr/hr_recipe.h) and exports it.
#include <string>

#include "cli/commands.h"
#include "cli/train_driver.h"
#include "train/hr/hr_trainer.h"

namespace vispco::cli {

void register_train_hr(CLI::App& app) {
  struct Opts {
    std::string recipe, base = "models/synthvqa-small";
    TrainFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "train-hr",
      "Train the bundled high-resolution LLaVA-NeXT model on SynthVQA-HR (resumes from <out>/checkpoint)");
  cmd->add_option("--recipe", o->recipe, "HR recipe JSON (e.g. configs/hr/synthvqa-hr.json)")->required();
  cmd->add_option("--base", o->base, "LLaVA-1.5 model folder whose weights start the run (fresh runs only)")
      ->capture_default_str();
  add_train_flags(cmd, o->flags, "init model, checkpoint, probes");
  cmd->callback([o] {
    train::HrTrainer trainer(train::load_hr_recipe(o->recipe), o->base, o->flags.out,
                             train_context(o->flags));
    drive_training(trainer, o->flags);
  });
}

}  // namespace vispco::cli
