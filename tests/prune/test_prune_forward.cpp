// Pruning inside the forward pass on the tiny random model, each against an independent computation:
// keep-all is exact, FastV's kept set equals a brute-force choice from a hand-computed attention row, decode
// on a pruned cache equals recomputation, ℓ = 0 pruning equals feeding only the kept tokens, and a batch
// under one plan equals each request alone.
#include <gtest/gtest.h>

#include <cmath>

#include "model/generate.h"
#include "model/reference.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

using testing::greedy;
using testing::max_diff;
using testing::test_pixels;

PlanHook hook_for(const VisionLanguageModel& m, const std::string& plan, uint64_t seed = 0) {
  return PlanHook(parse_plan(plan, m.shape().n_visual_tokens), m.shape(), seed);
}

// Passes every token through gather_tokens before layer 2: the removal machinery with nothing removed.
struct GatherAllHook : PrefillHook {
  bool acts_before(int64_t layer) const override { return layer == 2; }
  bool apply(int64_t, TokenState& s, const LayerSignals&) override {
    const int64_t B = s.hidden.size(0), T = s.hidden.size(1);
    s = gather_tokens(s, at::arange(T, at::kLong).unsqueeze(0).expand({B, T}).contiguous());
    return true;
  }
};

// Records the hidden states entering layer `at_layer`.
struct CaptureHook : PrefillHook {
  int64_t at_layer;
  TokenState seen;
  explicit CaptureHook(int64_t l) : at_layer(l) {}
  bool acts_before(int64_t layer) const override { return layer == at_layer; }
  bool apply(int64_t, TokenState& s, const LayerSignals&) override {
    seen = s;
    return false;
  }
};

TEST(PruneForward, KeepAllReproducesUnprunedLogitsExactly) {
  auto m = testing::load_tiny();
  VlmRequest req{test_pixels(56, 11), m.prompt_ids("What shape is the red object?")};
  auto base = generate(m, {req}, greedy(4), nullptr, true);
  auto keep_all = hook_for(m, "fastv:layer=2,keep=16");
  auto a = generate(m, {req}, greedy(4), &keep_all, true);
  GatherAllHook gather;
  auto b = generate(m, {req}, greedy(4), &gather, true);
  for (size_t s = 0; s < base.step_logits.size(); ++s) {
    EXPECT_TRUE(at::equal(a.step_logits[s], base.step_logits[s])) << "step " << s;
    EXPECT_TRUE(at::equal(b.step_logits[s], base.step_logits[s])) << "step " << s;
  }
  EXPECT_EQ(a.tokens, base.tokens);
}

TEST(PruneForward, FastVKeepsTheTopTokensOfAHandComputedAttentionRow) {
  auto m = testing::load_tiny();
  const int64_t layer = 2, K = 5;
  VlmRequest req{test_pixels(56, 12), m.prompt_ids("Is there a blue cube?")};
  CaptureHook cap(layer - 1);
  generate(m, {req}, greedy(1), &cap);
  auto fastv = hook_for(m, "fastv:layer=2,keep=5");
  generate(m, {req}, greedy(1), &fastv);
  ASSERT_EQ(fastv.traces().size(), 1u);

  // Attention of the last token at layer 1, by hand: RMSNorm, projections, RoPE, softmax, head mean.
  const auto& cfg = m.config().text;
  auto params = m.net()->named_parameters();
  auto W = [&](const std::string& n) { return params["language_model.model.layers.1." + n]; };
  auto h = cap.seen.hidden[0];  // [T, D]
  const int64_t T = h.size(0), H = cfg.num_attention_heads, Hkv = cfg.n_kv_heads(), Dh = cfg.d_head();
  auto x = ref::rms_norm(h, W("input_layernorm.weight"), cfg.rms_norm_eps);
  auto q = at::matmul(x, W("self_attn.q_proj.weight").t());
  auto k = at::matmul(x, W("self_attn.k_proj.weight").t());
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = cap.seen.positions[0][t].item<int64_t>();
  std::vector<double> row(T, 0.0);
  for (int64_t hd = 0; hd < H; ++hd) {
    const int64_t kv = hd / (H / Hkv);
    auto qh = ref::rope(q.narrow(1, hd * Dh, Dh).contiguous(), pos, cfg.rope_theta);
    auto kh = ref::rope(k.narrow(1, kv * Dh, Dh).contiguous(), pos, cfg.rope_theta);
    std::vector<double> logit(T);
    double mx = -1e300, z = 0;
    for (int64_t s = 0; s < T; ++s) {
      logit[s] = at::dot(qh[T - 1], kh[s]).item<double>() / std::sqrt(double(Dh));
      mx = std::max(mx, logit[s]);
    }
    for (int64_t s = 0; s < T; ++s) z += std::exp(logit[s] - mx);
    for (int64_t s = 0; s < T; ++s) row[s] += std::exp(logit[s] - mx) / z / H;
  }
  // Brute force: sort all visual tokens by that score, take the first K patch indices.
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t t = 0; t < T; ++t)
    if (cap.seen.visual[0][t].item<bool>())
      ranked.push_back({row[t], cap.seen.grid_index[0][t].item<int64_t>()});
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::set<int64_t> expect, got;
  for (int64_t i = 0; i < K; ++i) expect.insert(ranked[i].second);
  auto kept = fastv.traces()[0].kept[0];
  for (int64_t g = 0; g < kept.size(0); ++g)
    if (kept[g].item<bool>()) got.insert(g);
  EXPECT_EQ(got, expect);
  std::printf("FastV margin between ranks K and K+1: %.3g\n", ranked[K - 1].first - ranked[K].first);
}

TEST(PruneForward, DecodeOnPrunedCacheEqualsRecomputationOfThePrunedSequence) {
  auto m = testing::load_tiny();
  VlmRequest req{test_pixels(56, 13), m.prompt_ids("How many spheres?")};
  // A query-independent scorer, so the recomputation (with generated tokens appended) keeps the same set.
  auto plan = hook_for(m, "random:layer=2,keep=5", 9);
  auto out = generate(m, {req}, greedy(5), &plan, true);
  std::vector<int64_t> gen(out.tokens[0].begin(), out.tokens[0].end() - 1);
  VlmRequest longer = req;
  for (auto t : gen) longer.prompt_ids.push_back(t);
  auto plan2 = hook_for(m, "random:layer=2,keep=5", 9);
  c10::InferenceMode guard;
  auto vis = m.encode_images(req.pixels.unsqueeze(0));
  auto state = build_prefill_state(m, {longer}, vis.embeds);
  const int64_t T0 = state.hidden.size(1) - static_cast<int64_t>(gen.size());
  KvCache cache(m.shape().n_layers);
  plan2.begin({}, {}, m.shape().default_layout());
  auto& lm = m.net()->language_model;
  auto logits = lm->logits(lm->forward(state, cache, &plan2));  // [1, T', V] with 11 visual tokens gone
  const int64_t T1 = logits.size(1);
  EXPECT_EQ(T1, T0 + (int64_t)gen.size() - 11);
  EXPECT_TRUE(at::equal(plan.traces()[0].kept, plan2.traces()[0].kept));
  double worst = 0;
  for (size_t s = 0; s < out.step_logits.size(); ++s)
    worst = std::max(worst,
                     max_diff(logits[0][T1 - 1 - (int64_t)gen.size() + (int64_t)s], out.step_logits[s][0]));
  std::printf("pruned decode vs recompute max |diff| = %.3g\n", worst);
  EXPECT_LT(worst, 1e-4);
}

TEST(PruneForward, LayerZeroPruningEqualsFeedingOnlyTheKeptTokens) {
  auto m = testing::load_tiny();
  VlmRequest req{test_pixels(56, 14), m.prompt_ids("What colour is the cone?")};
  auto plan = hook_for(m, "divprune:layer=0,keep=6");
  auto out = generate(m, {req}, greedy(3), &plan, true);
  c10::InferenceMode guard;
  auto vis = m.encode_images(req.pixels.unsqueeze(0));
  auto full = build_prefill_state(m, {req}, vis.embeds);
  auto kept = plan.traces()[0].kept[0];
  std::vector<int64_t> idx;
  for (int64_t t = 0; t < full.hidden.size(1); ++t) {
    const int64_t g = full.grid_index[0][t].item<int64_t>();
    if (g < 0 || kept[g].item<bool>()) idx.push_back(t);
  }
  ASSERT_EQ(idx.size(), full.hidden.size(1) - 16 + 6u);
  auto only = gather_tokens(full, at::tensor(idx, at::kLong).unsqueeze(0));  // original positions kept
  KvCache cache(m.shape().n_layers);
  auto& lm = m.net()->language_model;
  auto h = lm->forward(only, cache);
  auto first = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);
  EXPECT_LT(max_diff(first, out.step_logits[0]), 1e-5);
}

TEST(PruneForward, BatchUnderOnePlanEqualsEachAlone) {
  auto m = testing::load_tiny();
  std::vector<VlmRequest> reqs = {{test_pixels(56, 21), m.prompt_ids("Is there a red sphere in the image?")},
                                  {test_pixels(56, 22), m.prompt_ids("How many cubes?")},
                                  {test_pixels(56, 23), m.prompt_ids("What does the text say on the left?")}};
  for (const char* p :
       {"fastv:layer=2,keep=4", "visionzip:layer=0,keep=6,contextual=2", "pdrop:layers=1/2/3,ratio=0.5"}) {
    auto hb = hook_for(m, p);
    auto batched = generate(m, reqs, greedy(4), &hb, true);
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto h1 = hook_for(m, p);
      auto single = generate(m, {reqs[i]}, greedy(4), &h1, true);
      EXPECT_EQ(single.tokens[0], batched.tokens[i]) << p << " request " << i;
      EXPECT_TRUE(at::equal(h1.traces().back().kept[0], hb.traces().back().kept[i])) << p << " request " << i;
      double worst = 0;
      for (size_t s = 0; s < single.step_logits.size(); ++s)
        worst = std::max(worst, max_diff(single.step_logits[s][0], batched.step_logits[s][i]));
      EXPECT_LT(worst, 1e-4) << p << " request " << i;
    }
  }
}

TEST(PruneForward, TokensReallyLeaveTheCache) {
  auto m = testing::load_tiny();
  VlmRequest req{test_pixels(56, 15), m.prompt_ids("What shape?")};
  auto plan = hook_for(m, "visionzip:layer=0,keep=6+fastv:layer=2,keep=3");
  auto out = generate(m, {req}, greedy(2), &plan);
  const int64_t n_text = static_cast<int64_t>(req.prompt_ids.size()) - 1;
  EXPECT_EQ(out.stats.tokens_per_layer,
            (std::vector<int64_t>{n_text + 6, n_text + 6, n_text + 3, n_text + 3}));
  EXPECT_EQ(out.stats.n_visual_kept, 3);
}

}  // namespace
}  // namespace vispco
