// Tests of the prefill speed benchmark's pieces (eval/prefill_bench.h) on the tiny preset: depth truncation,
// synthetic prompts, the median, and one end-to-end run whose FLOPs come from the FLOPs model.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/prefill_bench.h"
#include "model/llava/presets.h"

namespace vispco::eval {
namespace {

// The benchmark applies its thread count to LibTorch (process-wide); restore it for the tests that follow.
struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

TEST(PrefillBench, TruncatesDepthKeepingWidths) {
  const auto& full = find_preset("llava-tinyllama-1.1b").config;  // 22 decoder layers, 23 of 24 vision used
  const auto two = truncated_config(full, 2);
  EXPECT_EQ(two.text.num_hidden_layers, 2);
  EXPECT_EQ(two.n_vision_layers_used(), 2);
  EXPECT_EQ(two.vision.num_hidden_layers, 2);  // only the layers that run are built
  EXPECT_EQ(two.text.hidden_size, 2048);
  EXPECT_EQ(two.vision.hidden_size, 1024);
  EXPECT_EQ(two.n_visual_tokens(), 576);
  EXPECT_NO_THROW(two.validate());
  EXPECT_EQ(truncated_config(full, 0), full);
  const auto deep = truncated_config(full, 30);  // deeper than the model: decoder and tower unchanged
  EXPECT_EQ(deep, full);
  const auto mid = truncated_config(full, 23);  // decoder 22 (whole), vision 23 (whole, as used)
  EXPECT_EQ(mid, full);
  EXPECT_THROW(truncated_config(full, -1), InvalidArgument);
}

TEST(PrefillBench, SyntheticPromptHoldsOneImagePlaceholder) {
  const auto cfg = preset_shape("llava-tinyllama-1.1b", 0);  // BOS 1, image 32000
  EXPECT_EQ(synthetic_prompt_ids(cfg, 1), (std::vector<int64_t>{1, 32000}));
  const auto ids = synthetic_prompt_ids(cfg, 40);
  ASSERT_EQ(ids.size(), 41u);  // 40 text + the placeholder
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[5], 32000);  // after BOS + 4 pieces, as "USER: "
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 32000), 1);
  for (size_t i = 1; i < ids.size(); ++i)
    if (i != 5) EXPECT_TRUE(ids[i] >= 3 && ids[i] < 32000) << i << ": " << ids[i];
  EXPECT_THROW(synthetic_prompt_ids(cfg, 0), InvalidArgument);
}

TEST(PrefillBench, Median) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({7.0}), 7.0);
  EXPECT_THROW(median({}), InvalidArgument);
}

TEST(PrefillBench, ValidateNamesTheBadField) {
  PrefillBenchConfig c;
  c.preset = "nope";
  try {
    c.validate();
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("llava-tinyllama-1.1b"), std::string::npos) << e.what();
  }
  c = {};
  c.repeats = 0;
  EXPECT_THROW(c.validate(), InvalidArgument);
  c = {};
  c.n_layers = -1;
  EXPECT_THROW(c.validate(), InvalidArgument);
  c = {};
  c.n_text = 0;
  EXPECT_THROW(c.validate(), InvalidArgument);
  c = {};
  c.dtype = c10::kLong;
  EXPECT_THROW(c.validate(), InvalidArgument);
  c = {};
  c.batch = 0;
  EXPECT_THROW(c.validate(), InvalidArgument);
}

TEST(PrefillBench, BatchOfImagesGivesEachImageItsOwnLogits) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny";
  c.n_threads = 1;
  PrefillBenchSetup one(c);
  c.batch = 3;
  PrefillBenchSetup three(c);  // same seed: its first image is the single setup's image
  const auto v1 = one.run_vision(), v3 = three.run_vision();
  EXPECT_EQ(v3.sizes(), (std::vector<int64_t>{3, 16, 64}));
  EXPECT_TRUE(at::allclose(v3[0], v1[0], 1e-5, 1e-6));
  EXPECT_FALSE(at::allclose(v3[1], v3[0], 1e-3, 1e-3)) << "the batch's images must differ";
  PrefillRunStats s1, s3;
  const auto l1 = one.run_prefill(v1, nullptr, &s1);
  const auto l3 = three.run_prefill(v3, nullptr, &s3);
  EXPECT_EQ(l3.sizes(), (std::vector<int64_t>{3, 448}));
  EXPECT_TRUE(at::allclose(l3[0], l1[0], 1e-4, 1e-5));
  EXPECT_EQ(s3.tokens_per_layer, s1.tokens_per_layer);  // no padding: the same prompt for every image
  EXPECT_EQ(s3.kv_cache_bytes, 3 * s1.kv_cache_bytes);
  EXPECT_EQ(three.matmul_flops(), 3 * one.matmul_flops());
}

TEST(PrefillBench, TinyRunReportsTimesAndModelFlops) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny";  // N_v = 16, 4 decoder layers, 2 vision layers (feature layer −2 of 2 → 1 used)
  c.n_text = 9;
  c.repeats = 2;
  c.n_threads = 1;
  std::vector<std::string> phases;
  const auto r = run_prefill_bench(c, [&](const std::string& s) { phases.push_back(s); });
  EXPECT_EQ(phases.size(), 4u);
  EXPECT_EQ(r.n_visual, 16);
  EXPECT_EQ(r.n_text, 9);
  EXPECT_EQ(r.n_decoder_layers, 4);
  EXPECT_EQ(r.n_vision_layers, find_preset("tiny").config.n_vision_layers_used());
  EXPECT_EQ(r.n_threads, 1);
  ASSERT_EQ(r.vision_ms_runs.size(), 2u);
  ASSERT_EQ(r.prefill_ms_runs.size(), 2u);
  EXPECT_GT(r.vision_ms, 0);
  EXPECT_GT(r.prefill_ms, 0);
  EXPECT_GT(r.matmul_gflops, 0);
  // FLOPs are the model's for 9 + 16 = 25 tokens at each of the 4 layers.
  const auto cfg = preset_shape("tiny", 0);
  EXPECT_EQ(r.flops.total, prefill_flops(cfg.flops, std::vector<int64_t>(4, 25)).total);
  EXPECT_NEAR(r.prefill_gflops, (r.flops.decoder_total + r.flops.lm_head) / (r.prefill_ms * 1e6), 1e-9);
  EXPECT_EQ(r.matmul_shape, "[25, 64] x [64, 128]");
  const auto j = r.to_json();
  EXPECT_EQ(j["preset"], "tiny");
  EXPECT_EQ(j["dtype"], "fp32");
  EXPECT_EQ(j["flops"]["total"].get<int64_t>(), r.flops.total);
  EXPECT_NE(r.table().find("decoder prefill"), std::string::npos);
}

TEST(PrefillBench, PrefillGivesFiniteLogitsOfTheVocabulary) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny";
  c.n_layers = 1;
  c.n_threads = 1;
  PrefillBenchSetup s(c);
  EXPECT_EQ(s.n_decoder_layers(), 1);
  EXPECT_EQ(s.n_tokens(), 40 + 16);
  const auto visual = s.run_vision();
  EXPECT_EQ(visual.sizes(), (std::vector<int64_t>{1, 16, 64}));
  const auto logits = s.run_prefill(visual);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 448}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace vispco::eval
