// Qwen2-VL's image processor (model/qwen2_vl/image_processor.h) on hand-worked cases: smart_resize's
// rounding (Python's half to even), its max and min paths and refusals; where a known pixel lands in the
// merge-blocked pixel_values; the preprocessor_config.json fallbacks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "core/errors.h"
#include "model/qwen2_vl/image_processor.h"

namespace vispco {
namespace {

using Size = std::pair<int64_t, int64_t>;
constexpr int64_t kMin = 56 * 56, kMaxDefault = 28 * 28 * 1280, kMaxSmall = 28 * 28 * 64;

TEST(QwenImageProcessor, SmartResizeRoundsHalfToEven) {
  // 42 / 28 = 1.5 → 2, 70 / 28 = 2.5 → 2, 98 / 28 = 3.5 → 4 (Python's round; half-up would give 84 for 70).
  EXPECT_EQ(smart_resize(42, 70, 28, kMin, kMaxDefault), Size(56, 56));
  EXPECT_EQ(smart_resize(98, 98, 28, kMin, kMaxDefault), Size(112, 112));
  EXPECT_EQ(smart_resize(70, 98, 28, kMin, kMaxDefault), Size(56, 112));
  // Ordinary rounding: 60 / 28 = 2.14 → 56, 100 / 28 = 3.57 → 112; 180 → 168, 250 → 252.
  EXPECT_EQ(smart_resize(60, 100, 28, kMin, kMaxSmall), Size(56, 112));
  EXPECT_EQ(smart_resize(180, 250, 28, kMin, kMaxSmall), Size(168, 252));
  EXPECT_EQ(smart_resize(56, 56, 28, kMin, kMaxSmall), Size(56, 56));  // exactly min_pixels: kept
}

TEST(QwenImageProcessor, SmartResizeMaxPathFloorsAndNeverGoesBelowTheFactor) {
  // 1000×500 rounds to 1008×504 = 508032 > 50176: β = √(500000 / 50176) = 3.1567; 1000/β/28 = 11.31 → 308,
  // 500/β/28 = 5.66 → 140 (43120 px).
  EXPECT_EQ(smart_resize(1000, 500, 28, kMin, kMaxSmall), Size(308, 140));
  // 20×3000 → 28×2996 = 83888 > 50176: β = 1.0935; 20/β/28 = 0.65 → floor 0 → max(28, 0) = 28;
  // 3000/β/28 = 97.98 → 97 → 2716.
  EXPECT_EQ(smart_resize(20, 3000, 28, kMin, kMaxSmall), Size(28, 2716));
}

TEST(QwenImageProcessor, SmartResizeMinPathCeils) {
  // 30×40 → 28×28 = 784 < 3136: β = √(3136 / 1200) = 1.6166; 30·β/28 = 1.73 → 2 → 56; 40·β/28 = 2.31 → 84.
  EXPECT_EQ(smart_resize(30, 40, 28, kMin, kMaxSmall), Size(56, 84));
  // 10×1990: the short side rounds to 0 (area 0 < min): β = √(3136 / 19900) = 0.397; 10·β/28 = 0.14 → 28;
  // 1990·β/28 = 28.2 → 29 → 812.
  EXPECT_EQ(smart_resize(10, 1990, 28, kMin, kMaxSmall), Size(28, 812));
  EXPECT_EQ(smart_resize(1, 1, 28, kMin, kMaxDefault), Size(56, 56));
  // 20×20: β = √(3136/400) = 2.8 and 20·β rounds to exactly 56.0 in doubles (ceil(2.0) = 2), as in Python.
  EXPECT_EQ(smart_resize(20, 20, 28, kMin, kMaxSmall), Size(56, 56));
}

TEST(QwenImageProcessor, SmartResizeRefusesAspectRatiosAbove200) {
  EXPECT_EQ(smart_resize(10, 2000, 28, kMin, kMaxDefault).first, 28);  // exactly 200: allowed
  try {
    smart_resize(10, 2001, 28, kMin, kMaxDefault);
    FAIL() << "an aspect ratio of 200.1 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("aspect ratio"), std::string::npos) << e.what();
  }
  EXPECT_THROW(smart_resize(0, 10, 28, kMin, kMaxDefault), InvalidArgument);
}

TEST(QwenImageProcessor, AKnownPixelLandsInItsMergeBlockedRowAndColumn) {
  // A 56×56 image needs no resize (56×56 = min_pixels): a 4×4 patch grid, 2×2 merge blocks. The pixel
  // (y 20, x 30) is in patch row 1 (py 6), patch column 2 (px 2): merge block (0, 1), inside it (1, 0), so
  // row ((0·2 + 1)·2 + 1)·2 + 0 = 6. Green is channel 1: columns 1·2·196 + t·196 + 6·14 + 2 = 478 + 196·t.
  cv::Mat img(56, 56, CV_8UC3, cv::Scalar::all(0));
  img.at<cv::Vec3b>(20, 30)[1] = 255;
  QwenImageProcessorConfig cfg;
  cfg.image_mean = {0, 0, 0};
  cfg.image_std = {1, 1, 1};
  const auto px = qwen_preprocess(img, cfg);
  EXPECT_EQ(px.grid_t, 1);
  EXPECT_EQ(px.grid_h, 4);
  EXPECT_EQ(px.grid_w, 4);
  EXPECT_EQ(px.n_visual_tokens(2), 4);
  ASSERT_EQ(px.pixel_values.sizes(), (at::IntArrayRef{16, 3 * 2 * 14 * 14}));
  EXPECT_EQ(px.pixel_values.scalar_type(), at::kFloat);
  const auto hits = px.pixel_values.nonzero();  // [2, 2]: (row, column) pairs
  ASSERT_EQ(hits.size(0), 2);
  EXPECT_EQ(hits[0][0].item<int64_t>(), 6);
  EXPECT_EQ(hits[0][1].item<int64_t>(), 478);
  EXPECT_EQ(hits[1][0].item<int64_t>(), 6);
  EXPECT_EQ(hits[1][1].item<int64_t>(), 478 + 196);
  EXPECT_FLOAT_EQ(px.pixel_values[6][478].item<float>(), 1.0f);  // 255 · (1/255)
}

TEST(QwenImageProcessor, NormalisesWithTheConfiguredMeanAndStd) {
  cv::Mat img(56, 56, CV_8UC3, cv::Scalar(255, 0, 51));  // R 255, G 0, B 51 (cv::Scalar is in Mat order)
  const QwenImageProcessorConfig cfg;
  const auto px = qwen_preprocess(img, cfg).pixel_values;
  const double want[3] = {(1.0 - cfg.image_mean[0]) / cfg.image_std[0],
                          (0.0 - cfg.image_mean[1]) / cfg.image_std[1],
                          (0.2 - cfg.image_mean[2]) / cfg.image_std[2]};
  for (int c = 0; c < 3; ++c) {
    const auto block = px.narrow(1, c * 392, 392);
    EXPECT_NEAR(block.min().item<double>(), want[c], 2e-7) << "channel " << c;
    EXPECT_NEAR(block.max().item<double>(), want[c], 2e-7) << "channel " << c;
  }
}

TEST(QwenImageProcessor, ResizesToTheSmartSizeAndRefusesBadImages) {
  cv::Mat img(60, 100, CV_8UC3, cv::Scalar::all(128));
  QwenImageProcessorConfig cfg;
  cfg.max_pixels = kMaxSmall;
  const auto px = qwen_preprocess(img, cfg);
  EXPECT_EQ(px.grid_h, 4);  // 56 / 14
  EXPECT_EQ(px.grid_w, 8);  // 112 / 14
  EXPECT_EQ(px.pixel_values.size(0), 32);
  EXPECT_THROW(qwen_preprocess(cv::Mat(), cfg), InvalidArgument);
  EXPECT_THROW(qwen_preprocess(cv::Mat(10, 10, CV_8UC1, cv::Scalar::all(0)), cfg), InvalidArgument);
  EXPECT_THROW(qwen_preprocess(cv::Mat(1, 201, CV_8UC3, cv::Scalar::all(0)), cfg), InvalidArgument);
  cfg.do_resize = false;
  EXPECT_THROW(qwen_preprocess(img, cfg), InvalidArgument);  // 60×100 is not a multiple of 28
}

TEST(QwenImageProcessor, ConfigFallsBackToSizeThenDefaultsAndRoundTrips) {
  const Qwen2VisionConfig vision;
  auto a = qwen_image_processor_config_from_json(nlohmann::json::object(), vision, "pre");
  EXPECT_EQ(a, QwenImageProcessorConfig{});
  auto b = qwen_image_processor_config_from_json(
      {{"size", {{"shortest_edge", 1000}, {"longest_edge", 20000}}}, {"max_pixels", 30000}}, vision, "pre");
  EXPECT_EQ(b.min_pixels, 1000);   // size.shortest_edge
  EXPECT_EQ(b.max_pixels, 30000);  // max_pixels before size.longest_edge
  EXPECT_EQ(qwen_image_processor_config_from_json(to_json(b), vision, "pre"), b);
  EXPECT_THROW(qwen_image_processor_config_from_json({{"patch_size", 16}}, vision, "pre"), ConfigError);
  EXPECT_THROW(qwen_image_processor_config_from_json({{"min_pixels", "x"}}, vision, "pre"), ConfigError);
  EXPECT_THROW(
      qwen_image_processor_config_from_json({{"min_pixels", 9000}, {"max_pixels", 100}}, vision, "pre"),
      ConfigError);
}

}  // namespace
}  // namespace vispco
