// Token heat-maps over LLaVA-NeXT's views (model/token_panels.h, prune/heatmap.h): the panels of two images
// on the tiny-next pinpoints, worked out by hand from transformers' AnyRes rules, and the rendered picture's
// layout — base view, gap, high-resolution view with the tile line.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/llava_next_model.h"
#include "prune/heatmap.h"

namespace vispco {
namespace {

TEST(HeatmapPanels, LlavaNextBaseViewAndTheUnpaddedTileGrid) {
  auto m = testing::load_tiny_next();  // 56-px tiles of 4 × 4 patches; pinpoints 56×112, 112×56, 112×112
  // 60 wide × 50 tall: best pinpoint 56 × 112 (H × W); resized 68 × 56 (scale 1.12, width ⌈67.2⌉), 22 px of
  // padding on the left; feature grid 4 × 8, unpadding keeps columns 2–5 (new width int(60·4/50) = 4).
  const auto p = m.token_panels(50, 60);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, 0);
  EXPECT_EQ(p[0].rows, 4);
  EXPECT_EQ(p[0].cols, 4);
  EXPECT_TRUE(p[0].square);
  EXPECT_DOUBLE_EQ(p[0].width, 60);
  EXPECT_DOUBLE_EQ(p[0].height, 50);
  EXPECT_EQ(p[1].first, 16);
  EXPECT_EQ(p[1].rows, 4);
  EXPECT_EQ(p[1].cols, 4);
  EXPECT_EQ(p[1].stride, 5);  // a newline token ends each row
  EXPECT_EQ(p[1].token(3, 3), 16 + 3 * 5 + 3);
  const double sx = 60.0 / 68.0;  // image pixels per canvas pixel
  EXPECT_NEAR(p[1].x0, (2 * 14 - 22) * sx, 1e-9);
  EXPECT_NEAR(p[1].width, (6 * 14 - 22) * sx - (2 * 14 - 22) * sx, 1e-9);
  EXPECT_NEAR(p[1].y0, 0, 1e-9);
  EXPECT_NEAR(p[1].height, 50, 1e-9);
  ASSERT_EQ(p[1].x_lines.size(), 1u);
  EXPECT_NEAR(p[1].x_lines[0], (56 - 22) * sx, 1e-9);  // the boundary between the two tiles
  EXPECT_TRUE(p[1].y_lines.empty());
  // LLaVA-1.5-style default: one square panel over the padded image.
  const auto sq = square_token_panel(20, 40, 2, 2, true);
  EXPECT_DOUBLE_EQ(sq.x0, 0);
  EXPECT_DOUBLE_EQ(sq.y0, -10);
  EXPECT_DOUBLE_EQ(sq.width, 40);
}

TEST(HeatmapPanels, RendersTheViewsSideBySideWithTheTileLines) {
  auto m = testing::load_tiny_next();
  // 100 × 100: canvas 112 × 112, no padding, 2 × 2 tiles, the 8 × 8 grid kept whole; N_v = 16 + 8·9 = 88.
  const auto panels = m.token_panels(100, 100);
  cv::Mat grey(100, 100, CV_8UC3, cv::Scalar(128, 128, 128));
  auto scores = at::full({88}, NAN, at::kFloat);
  auto kept = at::zeros({88}, at::kBool);
  kept[16] = true;  // the high-resolution grid's cell (0, 0)
  const auto img = render_token_heatmap(grey, panels, scores, kept, 80);
  ASSERT_EQ(img.rows, 80);
  ASSERT_EQ(img.cols, 80 + 8 + 80);
  EXPECT_EQ(img.at<cv::Vec3b>(5, 84), cv::Vec3b(255, 255, 255));      // the gap
  EXPECT_EQ(img.at<cv::Vec3b>(20, 88 + 40), cv::Vec3b(0, 255, 255));  // the vertical tile line (x = 50)
  EXPECT_EQ(img.at<cv::Vec3b>(40, 88 + 20), cv::Vec3b(0, 255, 255));  // the horizontal one (y = 50)
  EXPECT_EQ(img.at<cv::Vec3b>(0, 88), cv::Vec3b(255, 255, 255));      // kept cell (0, 0) outlined
  EXPECT_EQ(img.at<cv::Vec3b>(30, 20), cv::Vec3b(128, 128, 128));     // base view: unscored, untinted
  auto short_kept = at::zeros({10}, at::kBool);
  EXPECT_THROW(render_token_heatmap(grey, panels, at::zeros({10}), short_kept, 80), InvalidArgument);
}

}  // namespace
}  // namespace vispco
