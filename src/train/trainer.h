// Training of the bundled SynthVQA model with LibTorch autograd (`vispco train`): stage 1 pre-trains the
// CLIP-style tower on dense per-patch labels, stage 2 trains projector + Llama decoder on multi-turn
// conversations with the tower frozen, loss on answer tokens only. AdamW, warm-up + cosine, clipping.
// Images are generated on the fly from SynthVQA (training seeds disjoint from the calib/test splits), so a
// step's data depends only on (recipe, stage, step): a resumed run sees exactly what an uninterrupted one
// would.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/context.h"
#include "train/recipe.h"
#include "train/training_run.h"

namespace vispco::train {

/// Runs a recipe into an output folder, checkpointing to `<out>/checkpoint/` and resuming from it.
class Trainer final : public TrainingRun {
 public:
  /// Starts fresh or resumes from `<out>/checkpoint/` when present (the recipe must match the saved one).
  /// Trains the tokenizer first on a fresh start. @throws InvalidArgument, IoError.
  Trainer(TrainRecipe recipe, std::string out_dir, RunContext ctx);
  ~Trainer() override;

  StepReport step() override;
  bool done() const override;
  /// Why a probe gate stopped the run ("" while none has): the message names the gate and the accuracy
  /// reached. The stop is recorded in the checkpoint, so the same command does not train past it.
  std::string stopped_by_probe() const override;
  void save_checkpoint() override;
  /// Writes a Hugging Face LLaVA folder (weights in `dtype`, tokenizer, configs).
  void export_model(const std::string& dir, c10::ScalarType dtype) override;
  double checkpoint_seconds() const override;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vispco::train
