// `vispco train`: trains (or resumes training of) the bundled SynthVQA model from a recipe and exports it.
#include <string>

#include "cli/commands.h"
#include "cli/train_driver.h"
#include "train/trainer.h"

namespace vispco::cli {

void register_train(CLI::App& app) {
  struct Opts {
    std::string recipe;
    TrainFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("train", "Train the bundled SynthVQA model (resumes from <out>/checkpoint)");
  cmd->add_option("--recipe", o->recipe, "Training recipe JSON (e.g. configs/synthvqa-small.json)")
      ->required();
  add_train_flags(cmd, o->flags, "tokenizer, checkpoint, logs");
  cmd->callback([o] {
    train::Trainer trainer(train::load_recipe(o->recipe), o->flags.out, train_context(o->flags));
    drive_training(trainer, o->flags);
  });
}

}  // namespace vispco::cli
