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

namespace vispco::train {

/// Progress of one optimiser step.
struct StepReport {
  std::string stage;  ///< "vision", "decoder-poolP" (low-resolution stage) or "decoder"
  int64_t step = 0;   ///< steps done in this stage (1-based after the step)
  int64_t steps = 0;  ///< steps of this stage
  double loss = 0;    ///< mean loss of the step (total)
  /// Decoder stages: the parts of the loss (ConversationLoss token / grounding / answer / readout / glyph); 0
  /// where unused.
  double token_loss = 0, grounding_loss = 0, answer_loss = 0, readout_loss = 0, glyph_loss = 0,
         glyph_value_loss = 0;
  double lr = 0;             ///< learning rate used
  double samples_per_s = 0;  ///< images per second over the step
};

/// Runs a recipe into an output folder, checkpointing to `<out>/checkpoint/` and resuming from it.
class Trainer {
 public:
  /// Starts fresh or resumes from `<out>/checkpoint/` when present (the recipe must match the saved one).
  /// Trains the tokenizer first on a fresh start. @throws InvalidArgument, IoError.
  Trainer(TrainRecipe recipe, std::string out_dir, RunContext ctx);
  ~Trainer();

  /// Steps until every stage is done, a probe gate stops the run, or `max_seconds` of wall time pass (≤ 0: no
  /// limit), checkpointing every recipe.checkpoint_seconds and at the end. @return true when training is
  /// complete.
  bool run(double max_seconds, const std::function<void(const StepReport&)>& on_step = {});
  /// One optimiser step of the current stage. @return its report. Precondition: !done().
  StepReport step();
  bool done() const;
  /// Why a probe gate stopped the run ("" while none has): the message names the gate and the accuracy
  /// reached. The stop is recorded in the checkpoint, so the same command does not train past it.
  std::string stopped_by_probe() const;
  /// Writes the checkpoint now (weights, optimiser state, position).
  void save_checkpoint();
  /// Writes the trained model as a Hugging Face LLaVA folder (weights in `dtype`, tokenizer, configs).
  void export_model(const std::string& dir, c10::ScalarType dtype);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vispco::train
