// What the seam carries for the next families (issue 44), shown with the test family of
// unpadded_mrope_family.h: images of one model that make different numbers of visual tokens on non-square
// grids (a batch mixes them), M-RoPE positions [3, B, T] kept through pruning and decoding, and a tokenizer
// that is not SentencePiece. References: Qwen2-VL (Wang et al. 2024) §2.1 and transformers' get_rope_index /
// apply_multimodal_rotary_pos_emb for M-RoPE; the single-image runs for batching.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"
#include "eval/eval_fixture.h"
#include "model/blocks.h"
#include "model/family_checks.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/text_config.h"
#include "model/unpadded_mrope_family.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

VisionLanguageModel load_family() {
  return VisionLanguageModel::load(testing::unpadded_mrope_model_dir(), RunContext{});
}

// A W×H noise image, RGB.
cv::Mat noise_image(int width, int height, uint64_t seed) {
  cv::Mat img(height, width, CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(img, cv::RNG::UNIFORM, cv::Scalar::all(0), cv::Scalar::all(256));
  return img;
}

TEST(Mrope, ThreeEqualAxesGiveOneDimensionalRope) {
  // Qwen2-VL §2.1: for text tokens (equal positions on every axis) M-RoPE is 1-D RoPE.
  const auto p = at::tensor({0, 3, 7, 20, 511}, at::kLong).view({1, 5});
  const auto one = rotary_tables(p, 16, 10000.0, at::kFloat);
  const auto three = rotary_tables(at::stack({p, p, p}, 0), 16, 10000.0, at::kFloat, {2, 3, 3});
  EXPECT_TRUE(at::equal(one.cos, three.cos));
  EXPECT_TRUE(at::equal(one.sin, three.sin));
}

TEST(Mrope, EachFrequencyTakesTheAngleOfItsSectionsAxis) {
  // One token at (t, h, w) = (1, 2, 3), D_h = 16, sections [2, 3, 3]: frequency i < 2 from t, 2 ≤ i < 5 from
  // h, 5 ≤ i < 8 from w, in both halves (transformers' mrope_section * 2 split).
  const auto p = at::tensor({1, 2, 3}, at::kLong).view({3, 1, 1});
  const auto rot = rotary_tables(p, 16, 10000.0, at::kFloat, {2, 3, 3});
  ASSERT_EQ(rot.cos.sizes(), (at::IntArrayRef{1, 1, 1, 16}));
  for (int j = 0; j < 16; ++j) {
    const int i = j % 8;
    const double pos = i < 2 ? 1 : i < 5 ? 2 : 3;
    const double angle = pos * std::pow(10000.0, -2.0 * i / 16);
    EXPECT_NEAR(rot.cos[0][0][0][j].item<double>(), std::cos(angle), 1e-6) << j;
    EXPECT_NEAR(rot.sin[0][0][0][j].item<double>(), std::sin(angle), 1e-6) << j;
  }
  EXPECT_THROW(rotary_tables(p, 16, 10000.0, at::kFloat, {2, 3, 4}), InvalidArgument);  // sums to 9, not 8
  EXPECT_THROW(rotary_tables(p, 16, 10000.0, at::kFloat, {4, 4}), InvalidArgument);     // 2 sections, 3 axes
}

TEST(Mrope, TheDecoderConfigReadsMropeSectionsAndRefusesOtherScalings) {
  const auto t = text_config_from_json({{"hidden_size", 64},
                                        {"num_attention_heads", 4},
                                        {"num_key_value_heads", 4},
                                        {"rope_scaling", {{"type", "mrope"}, {"mrope_section", {2, 3, 3}}}}});
  EXPECT_EQ(t.mrope_section, (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(t.position_axes(), 3);
  EXPECT_NO_THROW(validate_text_config(t));
  EXPECT_EQ(text_config_from_json(text_config_to_json(t)), t);
  auto bad = t;
  bad.mrope_section = {2, 3, 4};
  EXPECT_THROW(validate_text_config(bad), ConfigError);
  EXPECT_THROW(text_config_from_json({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}), ConfigError);
}

TEST(FamilyLayouts, EachImageMakesTheTokensOfItsOwnGrid) {
  auto m = load_family();
  auto llava = testing::load_tiny();
  EXPECT_EQ(m.shape().position_axes, 3);
  // 56-px tower, 14-px patches (4×4). A 64×32 image sits at y ∈ [16, 48) of its 64-px square, scaled by 56/64
  // to [14, 42): patch rows 1 ([14, 28)) and 2 ([28, 42)), every column → 2×4 = 8 tokens. 32×64: 4×2. 40×40:
  // 4×4.
  const std::vector<std::pair<cv::Mat, VisualLayout>> cases = {{noise_image(64, 32, 1), {8, 2, 4}},
                                                               {noise_image(40, 40, 2), {16, 4, 4}},
                                                               {noise_image(32, 64, 3), {8, 4, 2}}};
  std::vector<at::Tensor> px;
  for (const auto& [img, want] : cases) {
    px.push_back(m.preprocess(img));
    EXPECT_EQ(testing::expected_unpadded_layout(img.cols, img.rows), want);
  }
  const auto vt = m.encode_image_list(px, true);
  ASSERT_EQ(vt.layouts.size(), 3u);
  EXPECT_TRUE(vt.ragged());
  EXPECT_EQ(vt.embeds.sizes(), (at::IntArrayRef{3, 16, 64}));
  for (int b = 0; b < 3; ++b) EXPECT_EQ(vt.layouts[b], cases[b].second) << b;
  // The wide image's tokens are rows 1–2 of the LLaVA tokens of the same pixels (patches 4..11).
  const auto full = llava.encode_images(px[0].narrow(0, 0, 3).unsqueeze(0)).embeds[0];
  EXPECT_LT(testing::max_diff(vt.row(0, m.shape()).embeds[0], full.narrow(0, 4, 8)), 1e-5);
  EXPECT_TRUE(at::equal(vt.embeds[0].narrow(0, 8, 8), at::zeros({8, 64})));  // padding after the row's tokens
  // The tall image keeps columns 1–2 of every row: patches 1, 2, 5, 6, 9, 10, 13, 14.
  const auto full2 = llava.encode_images(px[2].narrow(0, 0, 3).unsqueeze(0)).embeds[0];
  const auto cols = full2.index_select(0, at::tensor({1, 2, 5, 6, 9, 10, 13, 14}, at::kLong));
  EXPECT_LT(testing::max_diff(vt.row(2, m.shape()).embeds[0], cols), 1e-5);
}

TEST(FamilyLayouts, PromptPositionsFollowQwen2VlsRule) {
  auto m = load_family();
  const auto ids = m.prompt_ids("hi");  // BOS, <image>, "\nQ: hi\nA:" (9 bytes)
  ASSERT_EQ(ids.size(), 11u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], m.shape().image_token_id);
  EXPECT_EQ(ids[2], '\n' + 3);
  const auto longer = m.prompt_ids("hiya");  // two tokens longer: the other row gets 2 padding columns
  const auto px = m.preprocess(noise_image(64, 32, 1));
  const VisualLayout layout{8, 2, 4};
  const auto vis = m.encode_image_list({px, px}).embeds;
  const auto s = build_prefill_state(m, {{px, ids}, {px, longer}}, vis, layout);
  ASSERT_EQ(s.positions.sizes(), (at::IntArrayRef{3, 2, 20}));
  // get_rope_index: text positions count on every axis; the image's patch (r, c) at (p₀, p₀ + r, p₀ + c) with
  // p₀ = 1 (after BOS); the text after it from p₀ + max(2, 4) = 5.
  for (int row = 0; row < 2; ++row) {
    const int pad = row == 0 ? 2 : 0, n_text_after = row == 0 ? 9 : 11;
    std::vector<std::array<int64_t, 3>> want(pad, {0, 0, 0});
    want.push_back({0, 0, 0});  // BOS
    for (int g = 0; g < 8; ++g) want.push_back({1, 1 + g / 4, 1 + g % 4});
    for (int k = 0; k < n_text_after; ++k) want.push_back({5 + k, 5 + k, 5 + k});
    ASSERT_EQ(want.size(), 20u);
    for (int t = 0; t < 20; ++t)
      for (int a = 0; a < 3; ++a)
        EXPECT_EQ(s.positions[a][row][t].item<int64_t>(), want[t][a]) << row << "," << t;
  }
  const auto next = next_positions(s.positions);  // one past the largest position: 5 + 9 and 5 + 11
  EXPECT_EQ(next.sizes(), (at::IntArrayRef{3, 2, 1}));
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ(next[a][0][0].item<int64_t>(), 14);
    EXPECT_EQ(next[a][1][0].item<int64_t>(), 16);
  }
}

TEST(FamilyLayouts, DecodingContinuesOnePastTheLargestPosition) {
  auto m = load_family();
  const auto px = m.preprocess(noise_image(64, 32, 4));
  const VlmRequest req{px, m.prompt_ids("What is it?")};
  GenerationConfig gc;
  gc.max_new_tokens = 3;
  gc.stop_at_eos = false;
  const auto got = generate(m, {req}, gc).tokens[0];
  // By hand: prefill, then each decode step at (p, p, p) with p = largest prompt position + 1, + 2.
  c10::InferenceMode guard;
  auto& lm = m.language_model();
  auto state = build_prefill_state(m, {req}, m.encode_image_list({px}).embeds, {8, 2, 4});
  KvCache cache(m.shape().n_layers);
  auto h = lm->forward(state, cache);
  std::vector<int64_t> want{lm->logits(h.narrow(1, h.size(1) - 1, 1)).argmax(-1).item<int64_t>()};
  const int64_t p = state.positions.max().item<int64_t>() + 1;
  for (int step = 0; step < 2; ++step) {
    TokenState s;
    s.hidden = lm->embed(at::tensor({want.back()}, at::kLong).view({1, 1}));
    s.positions = at::full({3, 1, 1}, p + step, at::kLong);
    s.valid = at::ones({1, 1}, at::kBool);
    s.visual = at::zeros({1, 1}, at::kBool);
    s.grid_index = at::full({1, 1}, -1, at::kLong);
    want.push_back(lm->logits(lm->forward(s, cache)).argmax(-1).item<int64_t>());
  }
  EXPECT_EQ(got, want);
}

TEST(FamilyLayouts, AMixedBatchGeneratesWhatEachImageGetsAlone) {
  auto m = load_family();
  const std::vector<cv::Mat> images = {noise_image(64, 32, 5), noise_image(40, 40, 6), noise_image(32, 64, 7),
                                       noise_image(64, 32, 8)};
  std::vector<VlmRequest> reqs;
  for (size_t i = 0; i < images.size(); ++i)
    reqs.push_back({m.preprocess(images[i]), m.prompt_ids(testing::test_question(int(i)))});
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  for (const std::string plan : {"none", "divprune:keep=6", "fastv:layer=2,keep=4"}) {
    PlanHook batched(parse_plan(plan, m.shape()), m.shape());
    const auto all = generate(m, reqs, gc, batched.plan().empty() ? nullptr : &batched);
    EXPECT_EQ(all.stats.n_visual, 16) << plan;  // the largest image's N_v
    for (size_t i = 0; i < reqs.size(); ++i) {
      PlanHook alone(parse_plan(plan, m.shape()), m.shape());
      const auto one = generate(m, {reqs[i]}, gc, alone.plan().empty() ? nullptr : &alone);
      EXPECT_EQ(all.tokens[i], one.tokens[0]) << plan << " row " << i;
      EXPECT_EQ(one.stats.n_visual, i == 1 ? 16 : 8);
      const int64_t kept = plan == "none" ? one.stats.n_visual : plan == "divprune:keep=6" ? 6 : 4;
      EXPECT_EQ(one.stats.n_visual_kept, kept) << plan << " row " << i;
    }
  }
}

// 6 images of three aspect ratios; answers are the family model's own greedy outputs, one image at a time.
struct MixedDataset {
  testing::TempDir tmp;
  fs::path dir = tmp.path() / "ds";
  MixedDataset() {
    auto m = load_family();
    fs::create_directories(dir / "images");
    const int sizes[3][2] = {{64, 32}, {40, 40}, {32, 64}};
    std::vector<std::string> images;
    for (int i = 0; i < 6; ++i) {
      const auto img = noise_image(sizes[i % 3][0], sizes[i % 3][1], 50 + i);
      images.push_back("images/" + std::to_string(i) + ".png");
      cv::Mat bgr;
      cv::cvtColor(img, bgr, cv::COLOR_RGB2BGR);
      cv::imwrite((dir / images.back()).string(), bgr);
    }
    testing::write_own_answers_dataset(m, dir, images, "u");
  }
};

TEST(FamilyLayouts, EvaluatesInMixedBatchesSearchesAndServes) {
  const MixedDataset fd;
  auto m = load_family();
  // Batches of 3: every batch holds the three layouts.
  testing::expect_evaluates_and_searches(m, testing::unpadded_mrope_model_dir(), fd.dir,
                                         "batched answers equal the single-image ones");
  std::vector<uchar> png;
  cv::imencode(".png", noise_image(64, 32, 9), png);  // channel order does not matter for noise
  testing::expect_serves_as_generate(load_family(), testing::unpadded_mrope_model_dir(),
                                     std::string(png.begin(), png.end()), "divprune:keep=6", 6);
}

}  // namespace
}  // namespace vispco
