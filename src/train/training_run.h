// What every resumable training command drives (`vispco train`, `vispco train-hr`): optimiser steps with a
// report each, checkpoints written at least every few minutes and at the end, export to a model folder. The
// loop and the learning-rate schedule are written once here.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>

#include "train/recipe.h"

namespace vispco::train {

/// Progress of one optimiser step.
struct StepReport {
  /// "vision", "decoder-poolP" (low-resolution stage) or "decoder" (`vispco train`); "hr-tower" or
  /// "hr-decoder" (`vispco train-hr`).
  std::string stage;
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

/// The learning rate of 0-based step `step` of stage `s`: linear warm-up over ⌊warmup · steps⌋ steps, then
/// cosine decay from s.lr to 10 % of it at the last step.
double scheduled_lr(const StageSettings& s, int64_t step);

/// A resumable training run.
class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  /// One optimiser step of the current stage. Precondition: !done().
  virtual StepReport step() = 0;
  /// True when every stage is done.
  virtual bool done() const = 0;
  /// Why the run stopped before done() ("" while it has not, and for runs without early stops).
  virtual std::string stopped_by_probe() const { return ""; }
  /// Writes the checkpoint now (weights, optimiser state, position), published whole.
  virtual void save_checkpoint() = 0;
  /// Writes the trained model as a Hugging Face folder with weights in `dtype`. @throws IoError.
  virtual void export_model(const std::string& dir, c10::ScalarType dtype) = 0;
  /// The recipe's checkpoint period, seconds of wall time.
  virtual double checkpoint_seconds() const = 0;

  /// Steps until done(), an early stop, or `max_seconds` of wall time (≤ 0: no limit), calling `on_step`
  /// after each step, checkpointing every checkpoint_seconds() and at the end. @return done().
  bool run(double max_seconds, const std::function<void(const StepReport&)>& on_step = {});
};

}  // namespace vispco::train
