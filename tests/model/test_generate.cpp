// Generation invariants on the tiny random model: KV-cache decode equals full recomputation, batched
// generation equals per-request generation, sampling rules.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

using testing::greedy;
using testing::max_diff;
using testing::test_pixels;

TEST(Generate, KvCacheDecodeEqualsFullRecomputation) {
  auto m = testing::load_tiny();
  const GenerationConfig gc = greedy(6);
  VlmRequest req{test_pixels(56, 1), m.prompt_ids("What colour is the cube?")};
  auto out = generate(m, {req}, gc, nullptr, /*record_logits=*/true);
  ASSERT_EQ(out.tokens[0].size(), 6u);
  ASSERT_EQ(out.step_logits.size(), 6u);

  // Recompute: prompt + all generated tokens but the last, one prefill without any cache reuse.
  c10::InferenceMode guard;
  auto& lm = m.net()->language_model;
  auto vis = m.encode_images(req.pixels.unsqueeze(0));
  auto prefix = build_prefill_state(m, {req}, vis.embeds);
  const int64_t T0 = prefix.hidden.size(1);
  std::vector<int64_t> gen(out.tokens[0].begin(), out.tokens[0].end() - 1);
  auto gen_emb = lm->embed(at::tensor(gen, at::kLong).view({1, -1}));
  TokenState full;
  full.hidden = at::cat({prefix.hidden, gen_emb}, 1);
  full.positions = at::arange(full.hidden.size(1), at::kLong).view({1, -1});
  full.valid = at::ones({1, full.hidden.size(1)}, at::kBool);
  full.visual = at::cat({prefix.visual, at::zeros({1, (int64_t)gen.size()}, at::kBool)}, 1);
  full.grid_index = at::cat({prefix.grid_index, at::full({1, (int64_t)gen.size()}, -1, at::kLong)}, 1);
  KvCache cache(m.config().text.num_hidden_layers);
  auto logits = lm->logits(lm->forward(full, cache));  // [1, T, V]
  double worst = 0;
  for (int64_t s = 0; s < 6; ++s)
    worst = std::max(worst, max_diff(logits[0][T0 - 1 + s], out.step_logits[s][0]));
  std::printf("decode vs recompute max |diff| = %.3g\n", worst);
  EXPECT_LT(worst, 1e-4);
}

TEST(Generate, BatchEqualsPerRequest) {
  auto m = testing::load_tiny();
  const GenerationConfig gc = greedy(5);
  std::vector<VlmRequest> reqs = {
      {test_pixels(56, 2), m.prompt_ids("Is there a red sphere in the image?")},
      {test_pixels(56, 3), m.prompt_ids("How many cubes?")},  // shorter: left-padded in the batch
      {test_pixels(56, 4), m.prompt_ids("What does the text say above the green cone on the left?")}};
  ASSERT_NE(reqs[0].prompt_ids.size(), reqs[1].prompt_ids.size());
  auto batched = generate(m, reqs, gc, nullptr, true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto single = generate(m, {reqs[i]}, gc, nullptr, true);
    EXPECT_EQ(single.tokens[0], batched.tokens[i]) << "request " << i;
    double worst = 0;
    for (size_t s = 0; s < single.step_logits.size(); ++s)
      worst = std::max(worst, max_diff(single.step_logits[s][0], batched.step_logits[s][i]));
    std::printf("request %zu batched vs single max |logit diff| = %.3g\n", i, worst);
    EXPECT_LT(worst, 1e-4);
  }
}

// A request carrying its image's tower output (keep=auto computes it for the K prediction) skips the tower
// and gives the answers and logits of the ordinary path — also for a plan that needs the [CLS] attention and
// keys.
TEST(Generate, PrecomputedVisualTokensEqualRunningTheTower) {
  auto m = testing::load_tiny();
  const GenerationConfig gc = greedy(4);
  std::vector<VlmRequest> reqs = {{test_pixels(56, 5), m.prompt_ids("How many cubes?")},
                                  {test_pixels(56, 6), m.prompt_ids("What shape is the red object?")}};
  std::vector<VlmRequest> pre = reqs;
  auto vt = m.encode_images(at::stack({reqs[0].pixels, reqs[1].pixels}), true);
  for (int64_t i = 0; i < 2; ++i) pre[i].visual = {vt.embeds[i], vt.cls_attention[i], vt.keys[i]};
  for (const std::string plan : {"none", "visionzip:keep=6", "fastv:layer=2,keep=5"}) {
    PlanHook h1(parse_plan(plan, m.shape()), m.shape()), h2(parse_plan(plan, m.shape()), m.shape());
    auto a = generate(m, reqs, gc, plan == "none" ? nullptr : &h1, true);
    auto b = generate(m, pre, gc, plan == "none" ? nullptr : &h2, true);
    EXPECT_EQ(a.tokens, b.tokens) << plan;
    for (size_t s = 0; s < a.step_logits.size(); ++s)
      EXPECT_LT(max_diff(a.step_logits[s], b.step_logits[s]), 1e-5) << plan;
    EXPECT_EQ(a.stats.n_visual_kept, b.stats.n_visual_kept) << plan;
  }
  pre[1].visual = {};  // one request without: the tower runs for the batch, same answers
  EXPECT_EQ(generate(m, pre, gc).tokens, generate(m, reqs, gc).tokens);
}

TEST(Generate, StatsCountTokens) {
  auto m = testing::load_tiny();
  const GenerationConfig gc = greedy(3);
  auto ids = m.prompt_ids("How many cubes?");
  auto out = generate(m, {{test_pixels(56, 5), ids}}, gc);
  EXPECT_EQ(out.stats.n_visual, 16);
  EXPECT_EQ(out.stats.n_visual_kept, 16);
  EXPECT_EQ(out.stats.n_text_max, (int64_t)ids.size() - 1);
  ASSERT_EQ(out.stats.tokens_per_layer.size(), 4u);
  EXPECT_EQ(out.stats.tokens_per_layer[0], (int64_t)ids.size() - 1 + 16);
  EXPECT_EQ(out.stats.n_generated, 3);
}

TEST(Generate, RejectsPromptWithoutImage) {
  auto m = testing::load_tiny();
  auto ids = m.tokenizer().encode("no image here", true);
  EXPECT_THROW(generate(m, {{test_pixels(56, 1), ids}}, GenerationConfig{}), InvalidArgument);
  GenerationConfig bad;
  bad.top_p = 0;
  EXPECT_THROW(bad.validate(), InvalidArgument);
}

TEST(Sampling, GreedyTakesArgmaxAndTopPKeepsTheNucleus) {
  auto logits = at::log(at::tensor({0.05f, 0.7f, 0.2f, 0.05f})).view({1, 4});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  GenerationConfig gc;
  EXPECT_EQ(sample_next(logits, gc, gen).item<int64_t>(), 1);
  gc.temperature = 1.0;
  gc.top_p = 0.6;  // the nucleus is {1}: mass before token 1 is 0 < 0.6, before token 2 it is 0.7
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sample_next(logits, gc, gen).item<int64_t>(), 1);
  gc.top_p = 0.8;  // nucleus {1, 2}
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(sample_next(logits, gc, gen).item<int64_t>());
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2}));
}

TEST(Sampling, TemperatureFrequenciesFollowSoftmaxAndSeedRepeats) {
  auto p = at::tensor({0.1f, 0.3f, 0.6f});
  auto logits = at::log(p).view({1, 3}).expand({4000, 3}).contiguous();
  GenerationConfig gc;
  gc.temperature = 1.0;
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(42);
  auto draws = sample_next(logits, gc, g1);
  auto freq = at::bincount(draws, {}, 3).to(at::kFloat) / 4000.0;
  // 4000 draws: standard error ≤ 0.008, so 0.04 is > 4.5 sigma.
  EXPECT_LT((freq - p).abs().max().item<float>(), 0.04f);
  auto g2 = at::make_generator<at::CPUGeneratorImpl>(42);
  EXPECT_TRUE(at::equal(sample_next(logits, gc, g2), draws));
}

// Rows with their own max_new_tokens in one batch: each leaves the decode batch when done (its KV-cache rows
// dropped), and every row's tokens and logits equal those it gets alone.
TEST(Generate, RowsWithTheirOwnLimitsLeaveTheBatchAndEqualAlone) {
  auto m = testing::load_tiny();
  std::vector<VlmRequest> reqs = {{test_pixels(56, 5), m.prompt_ids("How many cubes?")},
                                  {test_pixels(56, 6), m.prompt_ids("Is there a red sphere in the image?")},
                                  {test_pixels(56, 7), m.prompt_ids("What colour?")}};
  std::vector<GenerationConfig> cfgs(3);
  const int64_t limits[] = {2, 6, 4};
  for (size_t i = 0; i < 3; ++i) {
    cfgs[i].max_new_tokens = limits[i];
    cfgs[i].stop_at_eos = false;
  }
  auto batched = generate(m, reqs, cfgs, nullptr, /*record_logits=*/true);
  ASSERT_EQ(batched.step_logits.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    auto alone = generate(m, {reqs[i]}, cfgs[i], nullptr, true);
    EXPECT_EQ(batched.tokens[i], alone.tokens[0]) << i;
    EXPECT_EQ(static_cast<int64_t>(batched.tokens[i].size()), limits[i]);
    EXPECT_EQ(batched.finish_reasons[i], "length");
    double worst = 0;
    for (size_t s = 0; s < alone.step_logits.size(); ++s)
      worst =
          std::max(worst, max_diff(alone.step_logits[s][0], batched.step_logits[s][static_cast<int64_t>(i)]));
    std::printf("row %zu batched vs alone max |logit diff| = %.3g\n", i, worst);
    EXPECT_LT(worst, 1e-4);
    // After a row has finished its logits are NaN: it is no longer computed.
    if (limits[i] < 6)
      EXPECT_TRUE(batched.step_logits[limits[i]][static_cast<int64_t>(i)].isnan().all().item<bool>());
  }
}

// The token callback sees every token in order and ends its row when it returns false.
TEST(Generate, TokenCallbackEndsItsRow) {
  auto m = testing::load_tiny();
  std::vector<VlmRequest> reqs = {{test_pixels(56, 8), m.prompt_ids("How many cubes?")},
                                  {test_pixels(56, 9), m.prompt_ids("What colour?")}};
  const GenerationConfig gc = greedy(5);
  std::vector<std::vector<int64_t>> seen(2);
  auto out = generate(m, reqs, {gc, gc}, nullptr, false, [&](size_t row, int64_t tok) {
    seen[row].push_back(tok);
    return !(row == 0 && seen[0].size() == 2);  // row 0 stops after its second token
  });
  ASSERT_EQ(out.tokens[0].size(), 2u);
  EXPECT_EQ(out.finish_reasons[0], "stop");
  EXPECT_EQ(out.tokens[1].size(), 5u);
  EXPECT_EQ(out.finish_reasons[1], "length");
  EXPECT_EQ(seen[0], out.tokens[0]);
  EXPECT_EQ(seen[1], out.tokens[1]);
  auto alone = generate(m, {reqs[1]}, gc);
  EXPECT_EQ(out.tokens[1], alone.tokens[0]);
}

// Sampled rows draw from their own generators: a row's sample equals the one it gets alone with its seed.
TEST(Generate, SampledRowsEqualAloneWithTheirSeeds) {
  auto m = testing::load_tiny();
  std::vector<VlmRequest> reqs = {{test_pixels(56, 10), m.prompt_ids("How many cubes?")},
                                  {test_pixels(56, 11), m.prompt_ids("How many cubes?")}};
  GenerationConfig a, b;
  a.max_new_tokens = b.max_new_tokens = 6;
  a.stop_at_eos = b.stop_at_eos = false;
  a.temperature = b.temperature = 1.5;
  a.seed = 3;
  b.seed = 4;
  auto batched = generate(m, reqs, {a, b}, nullptr, false);
  EXPECT_EQ(batched.tokens[0], generate(m, {reqs[0]}, a).tokens[0]);
  EXPECT_EQ(batched.tokens[1], generate(m, {reqs[1]}, b).tokens[0]);
}

}  // namespace
}  // namespace vispco
