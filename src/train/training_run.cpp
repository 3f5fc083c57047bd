// The training loop and learning-rate schedule shared by every trainer (see training_run.h).
#include "train/training_run.h"

#include <cmath>

#include "cost/timer.h"

namespace vispco::train {

double scheduled_lr(const StageSettings& s, int64_t step) {
  const auto warm = static_cast<int64_t>(s.warmup * s.steps);
  if (step < warm) return s.lr * double(step + 1) / double(warm);
  const double t = s.steps > warm ? double(step - warm) / double(s.steps - warm) : 1.0;
  return s.lr * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * t)));
}

bool TrainingRun::run(double max_seconds, const std::function<void(const StepReport&)>& on_step) {
  Stopwatch total, since_ckpt;
  while (!done() && stopped_by_probe().empty()) {
    if (max_seconds > 0 && total.ms() / 1000.0 >= max_seconds) break;
    auto r = step();
    if (on_step) on_step(r);
    if (since_ckpt.ms() / 1000.0 >= checkpoint_seconds()) {
      save_checkpoint();
      since_ckpt.reset();
    }
  }
  save_checkpoint();
  return done();
}

}  // namespace vispco::train
