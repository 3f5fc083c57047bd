// Training of the bundled high-resolution model (`vispco train-hr`, issue 48): a LLaVA-NeXT network started
// from the bundled SynthVQA model's weights (tower, projector, decoder) plus a fresh image_newline, trained
// on SynthVQA-HR in the two stages of train/hr/hr_recipe.h. Images are generated on the fly (training seeds
// disjoint from hr-calib/hr-test), so a step's data depends only on (recipe, stage, step): a resumed run sees
// exactly what an uninterrupted one would.
#pragma once
#include <c10/core/ScalarType.h>

#include <memory>
#include <string>

#include "core/context.h"
#include "train/hr/hr_recipe.h"
#include "train/training_run.h"

namespace vispco::train {

/// Runs an HR recipe into a run folder: `<out>/init` (the starting LLaVA-NeXT folder, fp32), checkpoints in
/// `<out>/checkpoint/` (written at least every recipe.checkpoint_seconds, published whole), probes in
/// `<out>/tower_probe.jsonl` and `<out>/probe.jsonl`.
class HrTrainer final : public TrainingRun {
 public:
  /// Starts fresh — builds `<out>/init` from the LLaVA-1.5 model folder `base_dir` (the bundled
  /// models/synthvqa-small) with LLaVA-NeXT's default pinpoints, which are SynthVQA-HR's canvases — or
  /// resumes from `<out>/checkpoint/` (`base_dir` is then not read; the recipe must equal the saved one).
  /// @throws InvalidArgument (recipe, another recipe's checkpoint), ConfigError (a base model of another
  /// family), IoError.
  HrTrainer(HrRecipe recipe, const std::string& base_dir, std::string out_dir, RunContext ctx);
  ~HrTrainer() override;

  /// One optimiser step of the current stage ("hr-tower" or "hr-decoder").
  StepReport step() override;
  bool done() const override;
  void save_checkpoint() override;
  /// Writes a Hugging Face LLaVA-NeXT folder (weights in `dtype`, tokenizer, configs).
  void export_model(const std::string& dir, c10::ScalarType dtype) override;
  double checkpoint_seconds() const override;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vispco::train
