// Selection arithmetic of DivPrune and VisionZip on hand-made inputs, and the heat-map rendering.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>

#include "prune/heatmap.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

TEST(DivPrune, GreedyMaxMinOnPointsOfALine) {
  // Points 0, 1, 2, 10 with distance |a − b|. Seed: the largest nearest-neighbour distance is point 10's (8).
  // Then the point farthest from {10}: 0 (10). Then max of min-distances to {10, 0}: 1 → 1, 2 → 2: pick 2.
  auto x = at::tensor({0.f, 1.f, 2.f, 10.f});
  auto dist = (x.unsqueeze(0) - x.unsqueeze(1)).abs();
  EXPECT_EQ(max_min_diverse_subset(dist, 3), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(max_min_diverse_subset(dist, 4), (std::vector<int64_t>{3, 0, 2, 1}));
}

TEST(DivPrune, NeverPicksADuplicateTwice) {
  auto x = at::tensor({0.f, 0.f, 5.f});  // two identical tokens
  auto dist = (x.unsqueeze(0) - x.unsqueeze(1)).abs();
  auto pick = max_min_diverse_subset(dist, 3);
  std::sort(pick.begin(), pick.end());
  EXPECT_EQ(pick, (std::vector<int64_t>{0, 1, 2}));
}

TEST(VisionZip, MergeAveragesEachGroupByKeySimilarity) {
  // Five remaining tokens, M = 2 contextual tokens: stride ⌊5/2⌋ = 2 → targets 0 and 2.
  // Keys: tokens 0, 1, 4 point along x; tokens 2, 3 along y. So token 1 and 4 join target 0, token 3 joins 2.
  auto rest = at::tensor({1.f, 10.f, 2.f, 20.f, 3.f, 30.f, 4.f, 40.f, 5.f, 50.f}).view({5, 2});
  auto keys = at::tensor({1.f, 0.f, 2.f, 0.1f, 0.f, 1.f, 0.1f, 3.f, 5.f, 0.2f}).view({5, 2});
  auto [merged, targets] = visionzip_merge(rest, keys, 2);
  EXPECT_TRUE(at::equal(targets, at::tensor({0, 2}, at::kLong)));
  // Group {0, 1, 4}: mean of (1,10), (2,20), (5,50) = (8/3, 80/3). Group {2, 3}: mean of (3,30), (4,40) =
  // (3.5, 35).
  auto expect = at::tensor({8.f / 3, 80.f / 3, 3.5f, 35.f}).view({2, 2});
  EXPECT_LT((merged - expect).abs().max().item<float>(), 1e-5);
}

TEST(Heatmap, OutlinesKeptPatchesAndTintsScoredOnes) {
  cv::Mat grey(20, 40, CV_8UC3, cv::Scalar(128, 128, 128));  // wide: padded to 40×40
  auto scores = at::tensor({0.1f, 0.9f, NAN, 0.5f});
  auto kept = at::tensor({0, 1, 0, 0}).to(at::kBool);
  auto img = render_token_heatmap(grey, 2, scores, kept, 64);
  ASSERT_EQ(img.rows, 64);
  // Patch 1 (top right) is kept: its top-left corner pixel is white.
  EXPECT_EQ(img.at<cv::Vec3b>(0, 32), cv::Vec3b(255, 255, 255));
  EXPECT_NE(img.at<cv::Vec3b>(0, 0), cv::Vec3b(255, 255, 255));
  // Patch 2 (bottom left, NaN) keeps the plain image; patch 3 is tinted, so it differs from it.
  const auto plain = img.at<cv::Vec3b>(50, 10), tinted = img.at<cv::Vec3b>(50, 50);
  EXPECT_EQ(plain[0], plain[2]);  // untouched grey-ish (padding is black, the image grey): channels equal
  EXPECT_NE(tinted, plain);
}

}  // namespace
}  // namespace vispco
