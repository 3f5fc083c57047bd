// The base_view baseline (prune/scorers/baselines.cpp): on a LLaVA-NeXT model it keeps exactly the base
// view's tokens — the first n² of an image's N_v, worked out from the AnyRes geometry — or a uniform stride
// of them; a model without a base view refuses it, and the scorer lists of searches know which baselines
// apply.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/generate.h"
#include "model/llava/presets.h"
#include "model/llava_next_model.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"
#include "prune/scorer.h"

namespace vispco {
namespace {

// The kept grid indices of image 0 after the plan's one stage.
std::vector<int64_t> kept_by(VisionLanguageModel& m, const VlmRequest& req, const std::string& plan) {
  PlanHook hook(parse_plan(plan, m.shape()), m.shape());
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  generate(m, {req}, gc, &hook);
  const auto kept = hook.traces().back().kept[0];
  std::vector<int64_t> out;
  for (int64_t i = 0; i < kept.size(0); ++i)
    if (kept[i].item<bool>()) out.push_back(i);
  return out;
}

TEST(BaseView, KeepsTheBaseImagesTokensOfALlavaNextImage) {
  auto m = testing::load_tiny_next();
  // 100×100 on tiny-next's pinpoints: 56-px tiles of 4×4 patches, so the base view is 16 tokens, then the
  // 2×2 tiles' 8×8 grid with a newline per row (88 in all).
  const VlmRequest req{m.preprocess(testing::pattern_image(100, 100, 3)), m.prompt_ids("What is it?")};
  std::vector<int64_t> base(16);
  for (int64_t i = 0; i < 16; ++i) base[i] = i;
  EXPECT_EQ(kept_by(m, req, "base_view:keep=16"), base);
  // K = 8 of 16: token i of 8 at the centre of the i-th stretch of 2, ⌊(i + ½)·2⌋ = 2i + 1.
  EXPECT_EQ(kept_by(m, req, "base_view:keep=8"), (std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_THROW(BoundPlan::bind("base_view:keep=17", m.shape(), ScorerEnv{}), InvalidArgument);
}

TEST(BaseView, OnlyTilingFamiliesHaveOneAndPoolOnlyWholeGrids) {
  const ModelShape llava = preset_shape("tiny", 0);
  EXPECT_THROW(BoundPlan::bind("base_view:keep=4", llava, ScorerEnv{}), InvalidArgument);
  auto next = testing::load_tiny_next();
  EXPECT_FALSE(make_scorer("base_view")->applies_to(llava));
  EXPECT_TRUE(make_scorer("base_view")->applies_to(next.shape()));
  EXPECT_TRUE(make_scorer("pool")->applies_to(llava));
  EXPECT_FALSE(make_scorer("pool")->applies_to(next.shape()));
  EXPECT_TRUE(make_scorer("uniform")->applies_to(next.shape()));
}

}  // namespace
}  // namespace vispco
