// The gradient scorer (model/saliency.h, prune/scorers/gradient.cpp) against independent computations: its
// saliency ‖∂ log p(y) / ∂ v_i‖ against central finite differences of the tiny model's log-probability, the
// kept set against the top-K of that saliency, batch rows against each request alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/errors.h"
#include "model/generate.h"
#include "model/saliency.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"

namespace vispco {
namespace {

// log p(y | prompt, visual) at the last prompt position, forward only.
double log_prob(VisionLanguageModel& m, const VlmRequest& req, const at::Tensor& visual, int64_t y) {
  c10::InferenceMode guard;
  auto state = build_prefill_state(m, {req}, visual);
  KvCache cache(m.shape().n_layers);
  auto& lm = m.net()->language_model;
  auto h = lm->forward(state, cache);
  auto logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1).to(at::kDouble);
  return at::log_softmax(logits, -1)[0][y].item<double>();
}

TEST(GradientScorer, SaliencyMatchesFiniteDifferences) {
  auto m = testing::load_tiny();
  VlmRequest req{testing::test_pixels(56, 61), m.prompt_ids("What color is the cube?")};
  auto vis = m.encode_images(req.pixels.unsqueeze(0)).embeds.clone();  // [1, N_v, D]
  auto sal = visual_token_saliency(m, {req}, vis, /*keep_grad=*/true);
  const int64_t y = sal.target[0].item<int64_t>(), N = vis.size(1), D = vis.size(2);
  const double f0 = log_prob(m, req, vis, y);
  EXPECT_NEAR(f0, sal.log_prob[0].item<double>(), 1e-5);
  // Central differences on every coordinate of every visual token.
  const double eps = 3e-3;
  auto fd = at::zeros({N, D}, at::kDouble);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) {
      auto plus = vis.clone(), minus = vis.clone();
      plus[0][i][d] += eps;
      minus[0][i][d] -= eps;
      fd[i][d] = (log_prob(m, req, plus, y) - log_prob(m, req, minus, y)) / (2 * eps);
    }
  auto g = sal.grad[0].to(at::kDouble);
  const double gmax = g.abs().max().item<double>();
  const double err = (g - fd).abs().max().item<double>();
  auto fd_norm = fd.norm(2, 1), s = sal.saliency[0].to(at::kDouble);
  const double rel = ((s - fd_norm).abs() / fd_norm).max().item<double>();
  std::printf(
      "gradient vs finite differences: max |g − fd| %.3g (max |g| %.3g); per-token norm max rel. error "
      "%.3g; saliency range [%.3g, %.3g]\n",
      err, gmax, rel, s.min().item<double>(), s.max().item<double>());
  EXPECT_LT(err, 0.02 * gmax);
  EXPECT_LT(rel, 0.02);
}

TEST(GradientScorer, KeepsTheTopSaliencyPatchesAndTimesThePrePass) {
  auto m = testing::load_tiny();
  GenerationConfig gc;
  gc.max_new_tokens = 2;
  VlmRequest req{testing::test_pixels(56, 62), m.prompt_ids("How many spheres?")};
  auto vis = m.encode_images(req.pixels.unsqueeze(0)).embeds;
  auto sal = visual_token_saliency(m, {req}, vis).saliency[0];
  auto top = std::get<1>(sal.topk(5));
  std::set<int64_t> expect;
  for (int64_t i = 0; i < 5; ++i) expect.insert(top[i].item<int64_t>());
  for (const char* plan : {"grad:layer=0,keep=5", "grad:layer=2,keep=5"}) {
    PlanHook h(parse_plan(plan, 16), m.shape());
    ASSERT_TRUE(h.wants_visual_saliency());
    auto out = generate(m, {req}, gc, &h);
    EXPECT_EQ(testing::kept_patches(h.traces()[0].kept[0]), expect) << plan;
    EXPECT_GT(out.stats.prepass_ms, 0.0);
    EXPECT_EQ(out.stats.n_visual_kept, 5);
  }
  // Without generate() there is no pre-pass: one clear error.
  PlanHook h(parse_plan("grad:layer=0,keep=5", 16), m.shape());
  c10::InferenceMode guard;
  auto state = build_prefill_state(m, {req}, vis);
  KvCache cache(m.shape().n_layers);
  h.begin({}, {}, m.shape().default_layout());
  EXPECT_THROW(m.net()->language_model->forward(state, cache, &h), InvalidArgument);
}

TEST(GradientScorer, BatchRowsEqualEachRequestAlone) {
  auto m = testing::load_tiny();
  std::vector<VlmRequest> reqs = {
      {testing::test_pixels(56, 63), m.prompt_ids("What shape?")},
      {testing::test_pixels(56, 64), m.prompt_ids("Is there a red cube left of it?")}};
  auto vis = m.encode_images(at::stack({reqs[0].pixels, reqs[1].pixels})).embeds;
  auto both = visual_token_saliency(m, reqs, vis);
  for (int b = 0; b < 2; ++b) {
    auto alone = visual_token_saliency(m, {reqs[b]}, vis.narrow(0, b, 1));
    EXPECT_EQ(both.target[b].item<int64_t>(), alone.target[0].item<int64_t>());
    EXPECT_LT(testing::max_diff(both.saliency[b], alone.saliency[0]),
              1e-4 * alone.saliency.max().item<double>());
  }
}

}  // namespace
}  // namespace vispco
