// Training of the high-resolution model (train/hr/hr_trainer.h) on a micro LLaVA base (336-px tower at tiny
// widths, so SynthVQA-HR's canvases tile as at full size): the starting LLaVA-NeXT folder carries the base's
// weights, each stage trains only its own parameters, and a resumed run takes the uninterrupted run's next
// step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/context.h"
#include "core/errors.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/llava/presets.h"
#include "test_util.h"
#include "train/hr/hr_trainer.h"
#include "train/micro_recipe.h"

namespace vispco::train {
namespace {

HrRecipe micro_hr_recipe() {
  HrRecipe r;
  r.tower = {.steps = 1, .batch = 1, .lr = 1e-3};
  r.decoder = {.steps = 3, .batch = 1, .lr = 1e-3};
  r.turns = 3;
  r.probe_every = 0;
  return r;
}

// The micro recipe's model (336 px, patch 14) with random weights, as a LLaVA-1.5 folder.
std::string write_base(const ::vispco::testing::TempDir& tmp) {
  const auto dir = tmp.str("base");
  write_random_llava(dir, testing_micro::micro_recipe().model, 5, at::kFloat);
  return dir;
}

// max |a − b| over the tensors of `prefix` in two folders (same names).
double max_diff(const std::string& a, const std::string& b, const std::string& prefix) {
  auto ta = io::CheckpointTensors::open_dir(a), tb = io::CheckpointTensors::open_dir(b);
  double d = 0;
  int n = 0;
  for (const auto& name : ta.names())
    if (name.rfind(prefix, 0) == 0) {
      d = std::max(
          d, (ta.tensor(name).to(at::kDouble) - tb.tensor(name).to(at::kDouble)).abs().max().item<double>());
      ++n;
    }
  EXPECT_GT(n, 0) << "no tensor named " << prefix << "…";
  return d;
}

TEST(HrTraining, TheStartingFolderIsTheBaseModelAsLlavaNextAndEachStageTrainsOnlyItsPart) {
  ::vispco::testing::TempDir tmp;
  const auto base = write_base(tmp), run = tmp.str("run");
  HrTrainer t(micro_hr_recipe(), base, run, RunContext{});
  const auto init = run + "/init";
  EXPECT_EQ(load_model_shape(init).architecture, "LlavaNextForConditionalGeneration");
  for (const char* part : {"vision_tower.", "multi_modal_projector.", "language_model."})
    EXPECT_EQ(max_diff(base, init, part), 0.0) << part;
  t.step();  // the tower stage's only step
  t.export_model(tmp.str("after_tower"), at::kFloat);
  EXPECT_GT(max_diff(init, tmp.str("after_tower"), "vision_tower."), 0.0);
  EXPECT_EQ(max_diff(init, tmp.str("after_tower"), "language_model."), 0.0);
  EXPECT_EQ(max_diff(init, tmp.str("after_tower"), "multi_modal_projector."), 0.0);
  t.step();  // a decoder step
  t.export_model(tmp.str("after_decoder"), at::kFloat);
  EXPECT_EQ(max_diff(tmp.str("after_tower"), tmp.str("after_decoder"), "vision_tower."), 0.0);
  EXPECT_GT(max_diff(tmp.str("after_tower"), tmp.str("after_decoder"), "language_model."), 0.0);
  EXPECT_GT(max_diff(tmp.str("after_tower"), tmp.str("after_decoder"), "multi_modal_projector."), 0.0);
  EXPECT_GT(max_diff(tmp.str("after_tower"), tmp.str("after_decoder"), "image_newline"), 0.0);
}

TEST(HrTraining, ResumeGivesTheSameNextStepLossAndRefusesAnotherRecipe) {
  ::vispco::testing::TempDir tmp;
  const auto base = write_base(tmp), run = tmp.str("run");
  const auto r = micro_hr_recipe();
  double uninterrupted = 0;
  {
    HrTrainer t(r, base, run, RunContext{});
    t.step();  // tower
    t.step();  // decoder step 1
    t.save_checkpoint();
    uninterrupted = t.step().loss;
  }
  HrTrainer resumed(r, "/nonexistent-base-is-not-read-on-resume", run, RunContext{});
  const double again = resumed.step().loss;
  std::printf("next-step loss: uninterrupted %.8f, resumed %.8f\n", uninterrupted, again);
  EXPECT_GT(uninterrupted, 0.0);
  EXPECT_NEAR(again, uninterrupted, 1e-6 * std::abs(uninterrupted));  // stated tolerance: 1e-6 relative
  auto other = r;
  other.seed = 99;
  EXPECT_THROW(HrTrainer(other, base, run, RunContext{}), InvalidArgument);
}

TEST(HrTraining, AnswerGroundingAddsAGradientWithoutChangingTheForward) {
  ::vispco::testing::TempDir tmp;
  const auto base = write_base(tmp);
  auto plain = micro_hr_recipe(), grounded = plain;
  grounded.decoder.answer_grounding = 1.0;
  HrTrainer a(plain, base, tmp.str("plain"), RunContext{}),
      b(grounded, base, tmp.str("grounded"), RunContext{});
  a.step();  // the tower step: the same in both runs
  b.step();
  const auto ra = a.step(), rb = b.step();  // the first decoder step, from equal weights on equal data
  // Recording the attention rows leaves the forward as it was: the token losses agree.
  EXPECT_NEAR(rb.token_loss, ra.token_loss, 1e-5 * ra.token_loss);
  EXPECT_EQ(ra.answer_loss, 0.0);
  // A cross-entropy of attention rows to a target spread over a few of ~1,000 positions is well above 0.
  EXPECT_GT(rb.answer_loss, 1.0);
  a.export_model(tmp.str("a"), at::kFloat);
  b.export_model(tmp.str("b"), at::kFloat);
  EXPECT_GT(max_diff(tmp.str("a"), tmp.str("b"), "language_model."), 0.0);  // the extra loss moved weights
}

TEST(HrTraining, ABaseModelOfAnotherFamilyIsRefused) {
  ::vispco::testing::TempDir tmp;
  const auto base = write_base(tmp);
  HrTrainer first(micro_hr_recipe(), base, tmp.str("run"), RunContext{});
  // The run's own starting folder is a LLaVA-NeXT model, not a LLaVA-1.5 base.
  EXPECT_THROW(HrTrainer(micro_hr_recipe(), tmp.str("run") + "/init", tmp.str("run2"), RunContext{}),
               ConfigError);
}

}  // namespace
}  // namespace vispco::train
