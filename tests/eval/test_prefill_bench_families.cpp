// The prefill benchmark on every family's presets and on images of a given size (eval/prefill_bench.h,
// eval/prefill_sweep.h): N_v and the FLOPs spec follow the image (FamilyModel::image_flops), counts worked
// by hand from the families' resize rules; keep ratios in the sweep resolve per image.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "eval/prefill_bench.h"
#include "eval/prefill_sweep.h"
#include "model/llava/llava_shape.h"
#include "model/llava_next/presets.h"
#include "model/random_presets.h"
#include "model/vlm.h"

namespace vispco::eval {
namespace {

struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

VisionLanguageModel build(const std::string& preset) {
  RunContext ctx;
  ctx.n_threads = 1;
  return find_random_preset(preset).build(0, 3, ctx);
}

TEST(ImageFlops, QwenFollowsSmartResize) {
  auto m = build("tiny-qwen2.5-vl");  // patch 14, merge 2, Qwen2-VL processor defaults
  // 1344×756 (w×h): 27·48 = 1296 merged tokens would need 1,016,064 px > max_pixels 1,003,520, so
  // smart_resize scales by β = √(1016064/1003520) = 1.00623: h = ⌊756/β/28⌋·28 = 26·28, w = ⌊1344/β/28⌋·28
  // = 47·28 → N_v = 26·47 = 1222 (52 × 94 patches).
  EXPECT_EQ(m.family().image_flops(756, 1344).n_visual_tokens, 1222);
  // 896² → 32·32 = 1024 merged tokens (64² patches); 448² → 256.
  EXPECT_EQ(m.family().image_flops(896, 896).n_visual_tokens, 1024);
  const FlopsSpec nominal = m.family().image_flops(448, 448);
  EXPECT_EQ(nominal, m.shape().flops);
  // 112×56 → 4 × 2 merged tokens, 8 × 4 = 32 patches: patch embedding and merger scale with the count.
  const FlopsSpec small = m.family().image_flops(56, 112);
  EXPECT_EQ(small.n_visual_tokens, 8);
  EXPECT_EQ(small.vision_patch_embed * 1024, nominal.vision_patch_embed * 32);
  EXPECT_EQ(small.projector * 256, nominal.projector * 8);
  EXPECT_LT(small.vision_layers, nominal.vision_layers);
  EXPECT_EQ(small.decoder, nominal.decoder);
  EXPECT_THROW(m.family().image_flops(0, 10), InvalidArgument);
}

TEST(ImageFlops, LlavaNextCountsItsTiles) {
  auto m = build("tiny-next");
  // 112×56 (w×h): pinpoint 56×112 → 1×2 tiles, grid 4×8: N_v = 16 + 4·9 = 52 (test_llava_next_anyres's
  // hand-worked case); base view + 2 tiles = 3 pictures through tower and projector.
  const FlopsSpec f = m.family().image_flops(56, 112);
  const FlopsSpec one = llava_flops_spec(find_llava_next_preset("tiny-next").config.llava);
  EXPECT_EQ(f.n_visual_tokens, 52);
  EXPECT_EQ(f.vision_layers, 3 * one.vision_layers);
  EXPECT_EQ(f.vision_patch_embed, 3 * one.vision_patch_embed);
  EXPECT_EQ(f.projector, 3 * one.projector);
  // 100×100 → 2×2 tiles, N_v = 88: 5 pictures.
  EXPECT_EQ(m.family().image_flops(100, 100).n_visual_tokens, 88);
  EXPECT_EQ(m.family().image_flops(100, 100).vision_layers, 5 * one.vision_layers);
}

TEST(ImageFlops, LlavaResizesEveryImageAlike) {
  auto m = build("tiny");
  EXPECT_EQ(m.family().image_flops(30, 200), m.shape().flops);
}

TEST(PrefillBenchFamilies, QwenImageOfAGivenSize) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny-qwen2-vl";
  c.image_width = 112;
  c.image_height = 56;
  c.n_text = 12;
  c.n_threads = 1;
  PrefillBenchSetup s(c);
  EXPECT_EQ(s.n_visual(), 8);
  EXPECT_EQ(s.n_tokens(), 12 + 8);
  EXPECT_EQ(s.image_shape().n_visual_tokens, 8);
  EXPECT_EQ(s.image_shape().grid_rows, 2);
  EXPECT_EQ(s.image_shape().grid_cols, 4);
  const auto visual = s.run_vision();
  EXPECT_EQ(visual.sizes(), (std::vector<int64_t>{1, 8, 64}));
  EXPECT_EQ(s.layout(), (VisualLayout{8, 2, 4}));
  PrefillRunStats stats;
  const auto logits = s.run_prefill(visual, nullptr, &stats);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 300}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
  EXPECT_EQ(stats.tokens_per_layer, std::vector<int64_t>(3, 20));
  // The FLOPs of the run are the image's: 20 tokens through each of the 3 layers.
  const FlopsSpec f =
      find_random_preset("tiny-qwen2-vl").build(0, 0, RunContext{}).family().image_flops(56, 112);
  EXPECT_EQ(s.flops().total, prefill_flops(f, std::vector<int64_t>(3, 20)).total);
}

TEST(PrefillBenchFamilies, DecodeTimingAfterTheImagesPrefill) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny-qwen2-vl";
  c.image_width = 112;
  c.image_height = 56;
  c.n_threads = 1;
  c.repeats = 2;
  c.batch = 2;
  c.decode_tokens = 3;
  {
    PrefillBenchSetup s(c);
    EXPECT_THROW(s.run_decode(4), InvalidArgument);  // no visual tokens yet
    s.run_vision();
    EXPECT_THROW(s.run_decode(1), InvalidArgument);
    EXPECT_GT(s.run_decode(4), 0.0);
  }
  const auto r = run_prefill_bench(c);
  EXPECT_EQ(r.decode_tokens, 3);
  ASSERT_EQ(r.decode_ms_runs.size(), 2u);
  EXPECT_DOUBLE_EQ(r.decode_ms_per_token, median(r.decode_ms_runs));
  EXPECT_NEAR(r.decode_tokens_per_s, 2 * 1000.0 / r.decode_ms_per_token, 1e-9);
  EXPECT_NE(r.table().find("decode, ms per step (3 tokens)"), std::string::npos) << r.table();
  c.decode_tokens = 1;
  EXPECT_THROW(c.validate(), InvalidArgument);
}

TEST(PrefillBenchFamilies, SweepKeepRatiosResolvePerImage) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny-qwen2.5-vl";
  c.image_width = 112;
  c.image_height = 112;  // 4 × 4 = 16 visual tokens
  c.n_text = 10;
  c.repeats = 1;
  c.n_threads = 1;
  const auto r = run_prefill_sweep(c, parse_sweep_spec("50%,25%", {"fastv:layer=1"}));
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.n_visual, 16);
  EXPECT_EQ(r.rows[0].keep, 16);
  EXPECT_EQ(r.rows[1].plan, "fastv:layer=1,keep=50%");
  EXPECT_EQ(r.rows[1].keep, 8);
  EXPECT_DOUBLE_EQ(r.rows[1].keep_percent, 50.0);
  EXPECT_EQ(r.rows[1].n_visual_kept, 8);
  // Layer 0 sees all 26 tokens, layers 1 and 2 the 10 text + 8 kept.
  EXPECT_EQ(r.rows[1].tokens_per_layer, (std::vector<int64_t>{26, 18, 18}));
  EXPECT_EQ(r.rows[2].keep, 4);
  EXPECT_EQ(r.rows[2].tokens_per_layer, (std::vector<int64_t>{26, 14, 14}));
  EXPECT_NE(r.table().find("fastv:layer=1 @25%"), std::string::npos) << r.table();
}

TEST(PrefillBenchFamilies, SweepRejectsCountsAboveTheImagesNv) {
  ThreadCountGuard threads;
  PrefillBenchConfig c;
  c.preset = "tiny-qwen2-vl";
  c.image_width = 56;
  c.image_height = 56;  // 2 × 2 = 4 visual tokens (nominal 448²: 256)
  c.repeats = 1;
  c.n_threads = 1;
  try {
    run_prefill_sweep(c, parse_sweep_spec("8", {"fastv:layer=1"}));
    FAIL() << "K = 8 > N_v = 4 must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("N_v = 4"), std::string::npos) << e.what();
  }
}

TEST(PrefillBenchFamilies, ParsesImageSizesAndKeepLists) {
  EXPECT_EQ(parse_image_size("1344x756"), (std::pair<int64_t, int64_t>{1344, 756}));
  EXPECT_EQ(parse_image_size("896\u00d7448"), (std::pair<int64_t, int64_t>{896, 448}));
  for (const char* bad : {"", "1344", "x756", "1344x", "0x10", "10x-3", "12ax4", "20000x10", "1344x756x2"})
    EXPECT_THROW(parse_image_size(bad), InvalidArgument) << bad;
  EXPECT_EQ(parse_keep_percent_list("50%, 25%,11.1%"), (std::vector<double>{50, 25, 11.1}));
  for (const char* bad : {"", "25", "0%", "101%", "25%,25%", "25%,", "a%", "%"})
    EXPECT_THROW(parse_keep_percent_list(bad), InvalidArgument) << bad;
  const auto counts = parse_sweep_spec("64,32", {"fastv"});
  EXPECT_EQ(counts.keeps, (std::vector<int64_t>{64, 32}));
  EXPECT_TRUE(counts.keep_percents.empty());
  const auto ratios = parse_sweep_spec("25%", {"fastv"});
  EXPECT_TRUE(ratios.keeps.empty());
  EXPECT_EQ(ratios.keep_percents, (std::vector<double>{25}));
  EXPECT_THROW(parse_sweep_spec("64,25%", {"fastv"}), InvalidArgument);
}

TEST(PrefillBenchFamilies, EveryPresetHasAShape) {
  for (const auto& p : random_presets()) {
    const ModelShape full = p.shape(0), one = p.shape(1);
    EXPECT_GT(full.n_visual_tokens, 0) << p.name;
    EXPECT_EQ(one.n_layers, 1) << p.name;
    EXPECT_EQ(one.hidden_size, full.hidden_size) << p.name;
  }
  EXPECT_EQ(find_random_preset("qwen2.5-vl-3b").shape(0).n_layers, 36);
  EXPECT_EQ(find_random_preset("qwen2.5-vl-3b").shape(0).n_visual_tokens, 256);
}

}  // namespace
}  // namespace vispco::eval
