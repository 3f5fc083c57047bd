// Continuous batching: rows that join a running decode batch (their group prefilled on its own, its KV cache
// merged with left padding) generate what they generate alone; the cache merge and trim keep every row's
// keys.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <opencv2/core.hpp>

#include "core/errors.h"
#include "model/chat_templates.h"
#include "model/decode_batch.h"
#include "model/qwen2_vl/presets.h"
#include "model/qwen2_vl/tiny_qwen.h"
#include "model/tiny_model.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

using testing::max_diff;
using testing::test_pixels;

at::Tensor filled(std::vector<int64_t> sizes, float base) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return at::arange(n, at::kFloat).add(base).view(sizes);
}

// Two caches of 3 and 5 positions join: the first's rows are left-padded by 2 masked zero positions, the
// second's are unchanged; keys/values/validity written out by hand.
TEST(KvCacheJoin, ShorterSideIsLeftPaddedWithMaskedPositions) {
  LayerKvCache a, b;
  a.append(filled({1, 2, 3, 4}, 0), filled({1, 2, 3, 4}, 100), at::ones({1, 3}, at::kBool));
  auto vb = at::ones({2, 5}, at::kBool);
  vb[1][0] = false;  // b's second row has its own left padding
  b.append(filled({2, 2, 5, 4}, 1000), filled({2, 2, 5, 4}, 2000), vb);
  a.concat_rows(b);
  ASSERT_EQ(a.length(), 5);
  ASSERT_EQ(a.keys().sizes(), (std::vector<int64_t>{3, 2, 5, 4}));
  EXPECT_TRUE(at::equal(a.keys()[0].narrow(1, 0, 2), at::zeros({2, 2, 4})));
  EXPECT_TRUE(at::equal(a.keys()[0].narrow(1, 2, 3), filled({1, 2, 3, 4}, 0)[0]));
  EXPECT_TRUE(at::equal(a.values()[0].narrow(1, 2, 3), filled({1, 2, 3, 4}, 100)[0]));
  EXPECT_TRUE(at::equal(a.keys().narrow(0, 1, 2), filled({2, 2, 5, 4}, 1000)));
  EXPECT_TRUE(at::equal(a.values().narrow(0, 1, 2), filled({2, 2, 5, 4}, 2000)));
  const auto want_valid =
      at::tensor({0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1}, at::kLong).to(at::kBool).view({3, 5});
  EXPECT_TRUE(at::equal(a.valid(), want_valid));
  // Appending after a join grows every row by one position.
  a.append(filled({3, 2, 1, 4}, -50), filled({3, 2, 1, 4}, -60), at::ones({3, 1}, at::kBool));
  EXPECT_EQ(a.length(), 6);
  EXPECT_TRUE(at::equal(a.keys().narrow(2, 5, 1), filled({3, 2, 1, 4}, -50)));
  EXPECT_TRUE(at::equal(a.keys()[0].narrow(1, 2, 3), filled({1, 2, 3, 4}, 0)[0]));
}

// When the longer rows leave, the columns that are padding in every remaining row are dropped.
TEST(KvCacheJoin, RowsLeavingTrimCommonPadding) {
  KvCache a(2), b(2);
  for (int l = 0; l < 2; ++l) {
    a.layers[l].append(filled({1, 1, 2, 3}, 10.f * l), filled({1, 1, 2, 3}, -10.f * l),
                       at::ones({1, 2}, at::kBool));
    b.layers[l].append(filled({1, 1, 6, 3}, 500), filled({1, 1, 6, 3}, 600), at::ones({1, 6}, at::kBool));
  }
  a.concat_rows(b);
  EXPECT_EQ(a.layers[0].length(), 6);
  a.select_rows(at::tensor({0}, at::kLong));  // b's row leaves
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(a.layers[l].length(), 2) << l;
    EXPECT_TRUE(at::equal(a.layers[l].keys(), filled({1, 1, 2, 3}, 10.f * l)));
    EXPECT_TRUE(at::equal(a.layers[l].values(), filled({1, 1, 2, 3}, -10.f * l)));
    EXPECT_TRUE(a.layers[l].valid().all().item<bool>());
  }
  KvCache three(3);
  EXPECT_THROW(three.concat_rows(b), InvalidArgument);
}

// Greedy decoding of exactly n tokens (EOS does not end a row).
GenerationConfig greedy(int64_t n) {
  GenerationConfig gc;
  gc.max_new_tokens = n;
  gc.stop_at_eos = false;
  return gc;
}

struct Alone {
  std::vector<int64_t> tokens;
  std::vector<at::Tensor> logits;  // per step [V]
};

Alone alone(VisionLanguageModel& m, const VlmRequest& r, const GenerationConfig& gc,
            const std::string& plan) {
  PlanHook hook(parse_plan(plan, m.shape()), m.shape());
  auto out = generate(m, {r}, gc, plan == "none" ? nullptr : &hook, true);
  Alone a{out.tokens[0], {}};
  for (const auto& l : out.step_logits) a.logits.push_back(l[0]);
  return a;
}

// Request 0 (unpruned) starts alone; after 2 steps group {1 (FastV ℓ=1 K=6), 2 (FastV)} joins, after 2 more
// request 3 (unpruned, the longest prompt). Every row's tokens and per-step logits equal those it gets alone
// with its own plan, although the joined cache mixes per-layer lengths and left padding.
TEST(DecodeBatch, RowsJoiningARunningBatchEqualAlone) {
  auto m = testing::load_tiny();
  const auto gc = greedy(7);
  std::vector<VlmRequest> reqs = {
      {test_pixels(56, 11), m.prompt_ids("How many cubes?")},
      {test_pixels(56, 12), m.prompt_ids("Is there a red sphere in the image?")},
      {test_pixels(56, 13), m.prompt_ids("What colour?")},
      {test_pixels(56, 14), m.prompt_ids("What does the text say above the green cone on the left?")}};
  const std::vector<std::string> plans = {"none", "fastv:layer=1,keep=6", "fastv:layer=1,keep=6", "none"};
  std::vector<GenerationConfig> cfg(4, gc);
  cfg[2].max_new_tokens = 3;  // leaves while others decode

  DecodeBatch batch(m);
  std::map<int64_t, FinishedRow> done;
  const auto run_steps = [&](int n) {
    for (int i = 0; i < n && !batch.empty(); ++i)
      for (auto& f : batch.step()) done[f.id] = std::move(f);
  };
  batch.add({reqs[0]}, {cfg[0]}, {0}, nullptr, {true});
  run_steps(2);
  PlanHook fastv(parse_plan(plans[1], m.shape()), m.shape());
  const auto st = batch.add({reqs[1], reqs[2]}, {cfg[1], cfg[2]}, {1, 2}, &fastv, {true, true});
  EXPECT_EQ(st.n_visual_kept, 6);
  EXPECT_EQ(batch.rows(), 3);
  run_steps(2);
  batch.add({reqs[3]}, {cfg[3]}, {3}, nullptr, {true});
  run_steps(100);
  ASSERT_TRUE(batch.empty());
  ASSERT_EQ(done.size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    const auto want = alone(m, reqs[i], cfg[i], plans[i]);
    const auto& got = done[i];
    EXPECT_EQ(got.tokens, want.tokens) << i;
    EXPECT_EQ(got.finish_reason, "length") << i;
    ASSERT_EQ(got.step_logits.size(), want.logits.size()) << i;
    double worst = 0;
    for (size_t s = 0; s < want.logits.size(); ++s)
      worst = std::max(worst, max_diff(got.step_logits[s][0], want.logits[s]));
    std::printf("request %lld joined vs alone max |logit diff| = %.3g\n", static_cast<long long>(i), worst);
    EXPECT_LT(worst, 1e-4) << i;
  }
}

// Sampled rows keep their own seeded sampler when they join: equal to alone up to the logits' rounding.
TEST(DecodeBatch, SampledRowJoiningKeepsItsSeed) {
  auto m = testing::load_tiny();
  GenerationConfig g0, g1;
  g0.max_new_tokens = g1.max_new_tokens = 6;
  g0.stop_at_eos = g1.stop_at_eos = false;
  g1.temperature = 0.8;
  g1.seed = 1234;
  VlmRequest r0{test_pixels(56, 21), m.prompt_ids("How many cubes?")};
  VlmRequest r1{test_pixels(56, 22), m.prompt_ids("What shape is the red object?")};
  DecodeBatch batch(m);
  batch.add({r0}, {g0}, {7}, nullptr, {false});
  batch.step();
  batch.add({r1}, {g1}, {9}, nullptr, {false});
  std::map<int64_t, std::vector<int64_t>> got;
  while (!batch.empty())
    for (auto& f : batch.step()) got[f.id] = f.tokens;
  EXPECT_EQ(got[7], generate(m, {r0}, g0).tokens[0]);
  EXPECT_EQ(got[9], generate(m, {r1}, g1).tokens[0]);
}

// A group that fails in its prefill (a prompt without the image placeholder) is refused and the running
// rows go on untouched: their tokens and logits still equal those they get alone.
TEST(DecodeBatch, AFailedJoinLeavesTheRunningBatchUnchanged) {
  auto m = testing::load_tiny();
  const auto gc = greedy(5);
  VlmRequest r{test_pixels(56, 41), m.prompt_ids("How many cubes?")};
  VlmRequest bad{test_pixels(56, 42), m.tokenizer().encode("no image here", true)};
  DecodeBatch batch(m);
  batch.add({r}, {gc}, {0}, nullptr, {true});
  batch.step();
  const auto bytes = batch.kv_cache_bytes();
  EXPECT_THROW(batch.add({bad}, {gc}, {1}, nullptr, {false}), InvalidArgument);
  EXPECT_EQ(batch.rows(), 1);
  EXPECT_EQ(batch.ids(), std::vector<int64_t>{0});
  EXPECT_EQ(batch.kv_cache_bytes(), bytes);
  std::vector<FinishedRow> done;
  while (!batch.empty())
    for (auto& f : batch.step()) done.push_back(std::move(f));
  ASSERT_EQ(done.size(), 1u);
  const auto want = alone(m, r, gc, "none");
  EXPECT_EQ(done[0].tokens, want.tokens);
  for (size_t s = 0; s < want.logits.size(); ++s)
    EXPECT_LT(max_diff(done[0].step_logits[s][0], want.logits[s]), 1e-5);
}

// A row that asks for logprobs keeps a StepLogprobs per generated token instead of the [V] logits: its
// values are the log-softmax of the logits a full-logit row of the same request records (an independent
// fp64 log-softmax computed here), and no logits are kept.
TEST(DecodeBatch, CompactLogprobsMatchTheFullLogitsAndKeepNoLogits) {
  auto m = testing::load_tiny();
  const auto gc = greedy(5);
  VlmRequest r{test_pixels(56, 51), m.prompt_ids("How many cubes?")};
  DecodeBatch batch(m);
  batch.add({r, r}, {gc, gc}, {0, 1}, nullptr, {true, false}, {-1, 3});
  std::map<int64_t, FinishedRow> done;
  while (!batch.empty())
    for (auto& f : batch.step()) done[f.id] = std::move(f);
  const auto& full = done[0];
  const auto& compact = done[1];
  EXPECT_TRUE(compact.step_logits.empty());
  EXPECT_TRUE(full.step_logprobs.empty());
  ASSERT_EQ(compact.tokens, full.tokens);
  ASSERT_EQ(compact.step_logprobs.size(), compact.tokens.size());
  for (size_t s = 0; s < compact.tokens.size(); ++s) {
    const auto logits = full.step_logits[s][0].to(at::kDouble);
    const auto logp = logits - logits.exp().sum().log();  // log-softmax written out
    const auto& c = compact.step_logprobs[s];
    EXPECT_EQ(c.chosen, compact.tokens[s]);
    EXPECT_NEAR(c.chosen_logprob, logp[c.chosen].item<double>(), 1e-5) << s;
    ASSERT_EQ(c.top_ids.size(), 3u);
    const auto order = std::get<1>(logp.sort(0, /*descending=*/true));
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(c.top_ids[k], order[static_cast<int64_t>(k)].item<int64_t>()) << s << " " << k;
      EXPECT_NEAR(c.top_logprobs[k], logp[c.top_ids[k]].item<double>(), 1e-5);
    }
  }
  EXPECT_THROW(DecodeBatch(m).add({r}, {gc}, {0}, nullptr, {false}, {21}), InvalidArgument);
}

TEST(DecodeBatch, MisuseIsRefused) {
  auto m = testing::load_tiny();
  const auto gc = greedy(4);
  VlmRequest r{test_pixels(56, 31), m.prompt_ids("How many cubes?")};
  DecodeBatch batch(m);
  EXPECT_TRUE(batch.step().empty());  // empty batch: nothing to do
  EXPECT_THROW(batch.add({r}, {gc, gc}, {0}, nullptr, {false}), InvalidArgument);
  EXPECT_THROW(batch.add({}, {}, {}, nullptr, {}), InvalidArgument);
  batch.add({r}, {gc}, {0}, nullptr, {false});
  batch.sample();
  EXPECT_THROW(batch.sample(), Error);
  EXPECT_THROW(batch.add({r}, {gc}, {1}, nullptr, {false}), Error);
  batch.advance();
  EXPECT_EQ(batch.rows(), 1);
  EXPECT_EQ(batch.n_generated(), 1);
}

// The split prefill (image prefix, then the rest on it): rows of different prompts — a system message, a
// three-turn conversation, different question lengths, so the joined prefixes and the texts after the image
// are left-padded — prefilled as one group after one row already decodes, generate what they generate alone
// through the one-piece prefill; the stored prefixes are unchanged by it (they are reused for a second add).
// On LLaVA (1-D RoPE) with DivPrune at ℓ = 0 and on the tiny Qwen2.5-VL (M-RoPE, 49 visual tokens) unpruned.
void expect_split_prefill_equals_alone(VisionLanguageModel& m, const std::string& plan, double tol) {
  const auto gc = greedy(5);
  const auto img = [](const std::string& q) { return ChatMessage{"user", {{true, ""}, {false, q}}, false}; };
  const auto text = [](const std::string& role, const std::string& t) {
    return ChatMessage{role, {{false, t}}, true};
  };
  const auto px = [&](uint64_t seed) {  // a random 64 × 64 RGB image through the family's preprocessing
    cv::Mat rgb(64, 64, CV_8UC3);
    cv::theRNG().state = seed;
    cv::randu(rgb, cv::Scalar::all(0), cv::Scalar::all(255));
    return m.preprocess(rgb);
  };
  std::vector<VlmRequest> reqs = {
      {px(1), conversation_prompt_ids(m, {img("How many cubes?")})},
      {px(2),
       conversation_prompt_ids(m, {text("system", "Answer in one word."), img("What colour is the cube?")})},
      {px(3), conversation_prompt_ids(
                  m, {img("Is it red?"), text("assistant", "yes"),
                      text("user", "What does the text above the green cone on the left say?")})}};
  const auto bound = BoundPlan::bind(plan, m.shape(), ScorerEnv{});
  DecodeBatch batch(m);
  std::map<int64_t, FinishedRow> done;
  batch.add({reqs[0]}, {gc}, {0}, bound.hook(0).get(), {true});  // a running row, prefilled in one piece
  for (auto& f : batch.step()) done[f.id] = std::move(f);
  std::vector<ImagePrefix> prefixes;
  for (int i = 1; i < 3; ++i) prefixes.push_back(batch.prefill_image_prefix(reqs[i], bound.hook(0).get()));
  ASSERT_NE(prefixes[0].n_prefix, prefixes[1].n_prefix);  // the system message sits before the image
  // Made together (one tower pass, one left-padded prefill, as the server makes a burst's misses): each row's
  // prefix is the one made alone — its padding dropped, the same positions, counts and next position, its
  // keys and values within rounding — and, like it, holds exact buffers.
  const auto together = batch.prefill_image_prefixes({reqs[1], reqs[2]}, bound.hook(0).get());
  ASSERT_EQ(together.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &a = together[i], &b = prefixes[i];
    EXPECT_TRUE(a.exact_buffers() && b.exact_buffers()) << plan << " " << i;
    EXPECT_EQ(a.n_prefix, b.n_prefix);
    EXPECT_EQ(a.n_visual, b.n_visual);
    EXPECT_EQ(a.n_visual_kept, b.n_visual_kept);
    EXPECT_EQ(a.tokens_per_layer, b.tokens_per_layer) << plan << " " << i;
    EXPECT_TRUE(at::equal(a.next_pos, b.next_pos)) << plan << " " << i;
    double worst = 0;
    for (size_t l = 0; l < a.cache.layers.size(); ++l) {
      ASSERT_EQ(a.cache.layers[l].length(), b.cache.layers[l].length()) << plan << " layer " << l;
      EXPECT_TRUE(a.cache.layers[l].valid().all().item<bool>());  // no padding left
      worst = std::max({worst, max_diff(a.cache.layers[l].keys(), b.cache.layers[l].keys()),
                        max_diff(a.cache.layers[l].values(), b.cache.layers[l].values())});
    }
    std::printf("%s prefix %zu: made in a batch vs alone, max |KV diff| %.3g\n", plan.c_str(), i, worst);
    EXPECT_LT(worst, tol) << plan << " " << i;
  }
  std::vector<at::Tensor> keys_before;
  for (const auto& p : prefixes) keys_before.push_back(p.cache.layers.back().keys().clone());
  const auto st = batch.add_after_prefixes({&prefixes[0], &prefixes[1]}, {reqs[1], reqs[2]}, {gc, gc}, {1, 2},
                                           {true, true});
  EXPECT_EQ(batch.rows(), 3);
  EXPECT_EQ(st.row_n_visual_kept[0], prefixes[0].n_visual_kept);
  while (!batch.empty())
    for (auto& f : batch.step()) done[f.id] = std::move(f);
  for (size_t i = 0; i < prefixes.size(); ++i)  // reused, not written into
    EXPECT_TRUE(at::equal(prefixes[i].cache.layers.back().keys(), keys_before[i])) << i;
  std::vector<int64_t> alone_tokens;
  for (int64_t i = 0; i < 3; ++i) {
    auto hook = bound.hook(0);
    const auto out = generate(m, {reqs[i]}, gc, hook.get(), true);
    alone_tokens = out.tokens[0];
    EXPECT_EQ(done[i].tokens, out.tokens[0]) << plan << " row " << i;
    double worst = 0;
    for (size_t s = 0; s < out.step_logits.size(); ++s)
      worst = std::max(worst, max_diff(done[i].step_logits.at(s)[0], out.step_logits[s][0]));
    std::printf("%s row %lld: split prefill vs one piece, max |logit diff| %.3g\n", plan.c_str(),
                static_cast<long long>(i), worst);
    EXPECT_LT(worst, tol) << plan << " row " << i;
  }
  // The stored prefix serves again: row 2 alone on it generates what it generates in one piece. A one-row
  // batch shares the prefix's tensors (ImagePrefix), then appends its text and decode steps: the prefix's
  // keys and values, every layer, stay as they were.
  std::vector<at::Tensor> kv_before;
  for (const auto& l : prefixes[1].cache.layers) {
    kv_before.push_back(l.keys().clone());
    kv_before.push_back(l.values().clone());
  }
  DecodeBatch again(m);
  again.add_after_prefixes({&prefixes[1]}, {reqs[2]}, {gc}, {9}, {false});
  std::vector<FinishedRow> last;
  while (!again.empty())
    for (auto& f : again.step()) last.push_back(std::move(f));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].tokens, alone_tokens) << plan;
  for (size_t l = 0; l < prefixes[1].cache.layers.size(); ++l) {
    EXPECT_TRUE(at::equal(prefixes[1].cache.layers[l].keys(), kv_before[2 * l])) << plan << " layer " << l;
    EXPECT_TRUE(at::equal(prefixes[1].cache.layers[l].values(), kv_before[2 * l + 1]))
        << plan << " layer " << l;
  }
  // A prefix with spare capacity in a buffer (a decode-style append grew it) would be written in place when
  // shared: refused.
  ImagePrefix spare = prefixes[1];
  auto& l0 = spare.cache.layers[0];
  l0.append(l0.keys().narrow(2, 0, 1), l0.values().narrow(2, 0, 1), l0.valid().narrow(1, 0, 1));
  EXPECT_FALSE(spare.exact_buffers());
  DecodeBatch refused(m);
  EXPECT_THROW(refused.add_after_prefixes({&spare}, {reqs[2]}, {gc}, {9}, {false}), InvalidArgument);
  EXPECT_TRUE(refused.empty());
}

TEST(DecodeBatch, SplitPrefillRowsEqualOnePieceAlone) {
  auto llava = testing::load_tiny();
  expect_split_prefill_equals_alone(llava, "divprune:layer=0,keep=8", 1e-4);
  expect_split_prefill_equals_alone(llava, "none", 1e-4);
  auto qwen = VisionLanguageModel::load(testing::tiny_qwen_dir(), RunContext{});
  expect_split_prefill_equals_alone(qwen, "none", 1e-4);
}

TEST(DecodeBatch, SplitPrefillRefusesMismatchedPrefixes) {
  auto m = testing::load_tiny();
  const auto gc = greedy(2);
  DecodeBatch batch(m);
  const VlmRequest a{test_pixels(56, 1), m.prompt_ids("q")};
  const auto pre = batch.prefill_image_prefix(a, nullptr);
  VlmRequest longer = a;
  longer.prompt_ids.insert(longer.prompt_ids.begin() + 1, 5);  // one more id before the image
  EXPECT_THROW(batch.add_after_prefixes({&pre}, {longer}, {gc}, {0}, {false}), InvalidArgument);
  EXPECT_THROW(batch.add_after_prefixes({&pre, &pre}, {a}, {gc}, {0}, {false}), InvalidArgument);
  VlmRequest ends = a;
  ends.prompt_ids.resize(static_cast<size_t>(pre.n_prefix) + 1);  // nothing after the image
  EXPECT_THROW(batch.add_after_prefixes({&pre}, {ends}, {gc}, {0}, {false}), InvalidArgument);
  EXPECT_TRUE(batch.empty());
}

}  // namespace
}  // namespace vispco
