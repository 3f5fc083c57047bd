// Pillow's bicubic resize (io/pil_resize.h) on hand-worked cases: each expected value is worked out in its
// comment from Pillow's Resample.c rules (bicubic a = −0.5; taps [int(c − support + 0.5), int(c + support +
// 0.5)) clipped to the image, c = (x + 0.5)·scale, support = 2·max(scale, 1), kernel argument (j − c + 0.5) /
// max(scale, 1), weights normalised to sum 1, rounded to nearest).
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "core/errors.h"
#include "io/pil_resize.h"

namespace vispco {
namespace {

// A 1-row image whose three channels hold `v`, `v` and 255 − `v`.
cv::Mat row_image(const std::vector<int>& v) {
  cv::Mat img(1, int(v.size()), CV_8UC3);
  for (size_t i = 0; i < v.size(); ++i) img.at<cv::Vec3b>(0, int(i)) = cv::Vec3b(v[i], v[i], 255 - v[i]);
  return img;
}

std::vector<int> channel(const cv::Mat& img, int c) {
  std::vector<int> out;
  for (int x = 0; x < img.cols; ++x) out.push_back(img.at<cv::Vec3b>(0, x)[c]);
  return out;
}

TEST(PilResize, ShrinkingTwofoldAntialiases) {
  // 4 → 2, scale 2, support 4, argument (j − c + 0.5)/2. Output 0: c = 1, taps j = 0..3 at −0.25, 0.25, 0.75,
  // 1.25: k = 0.8671875, 0.8671875, 0.2265625, −0.0703125 (sum 1.890625). For [0, 100, 200, 255]:
  // (100·0.8671875 + 200·0.2265625 − 255·0.0703125) / 1.890625 = 60.35 → 60. Output 1: c = 3, the same
  // weights reversed: (100·0.2265625 + 200·0.8671875 + 255·0.8671875) / 1.890625 = 220.68 → 221.
  // The third channel (255 − v) is [255, 155, 55, 0]: (255·0.8671875 + 155·0.8671875 + 55·0.2265625) /
  // 1.890625 = 194.65 → 195 and (−255·0.0703125 + 155·0.2265625 + 55·0.8671875) / 1.890625 = 34.32 → 34.
  const auto out = io::resize_bicubic_pil(row_image({0, 100, 200, 255}), 2, 1);
  EXPECT_EQ(channel(out, 0), (std::vector<int>{60, 221}));
  EXPECT_EQ(channel(out, 1), (std::vector<int>{60, 221}));
  EXPECT_EQ(channel(out, 2), (std::vector<int>{195, 34}));
  // OpenCV's INTER_CUBIC (a = −0.75, 4 taps, no antialiasing) gives other values here.
  cv::Mat cv_out;
  cv::resize(row_image({0, 100, 200, 255}), cv_out, cv::Size(2, 1), 0, 0, cv::INTER_CUBIC);
  EXPECT_NE(channel(cv_out, 0), channel(out, 0));
}

TEST(PilResize, EnlargingTwofold) {
  // 2 → 4, scale 0.5, support 2, argument j − c + 0.5, taps clipped to j ∈ {0, 1}. Input [0, 200]:
  //   c = 0.25: k(0.25) = 0.8671875, k(1.25) = −0.0703125 → 200·(−0.0703125)/0.796875 = −17.6 → 0;
  //   c = 0.75: k(−0.25) = 0.8671875, k(0.75) = 0.2265625 → 200·0.2265625/1.09375 = 41.43 → 41;
  //   c = 1.25: k(−0.75), k(0.25) → 200·0.8671875/1.09375 = 158.57 → 159;
  //   c = 1.75: k(−1.25), k(−0.25) → 200·0.8671875/0.796875 = 217.65 → 218.
  EXPECT_EQ(channel(io::resize_bicubic_pil(row_image({0, 200}), 4, 1), 0),
            (std::vector<int>{0, 41, 159, 218}));
}

TEST(PilResize, KeepsConstantsAndCopiesAtTheSameSize) {
  cv::Mat grey(23, 37, CV_8UC3, cv::Scalar(17, 128, 250));
  for (auto [w, h] : std::vector<std::pair<int, int>>{{11, 50}, {74, 5}, {37, 9}, {3, 23}}) {
    const auto out = io::resize_bicubic_pil(grey, w, h);
    ASSERT_EQ(out.size(), cv::Size(w, h));
    EXPECT_EQ(cv::norm(out, cv::Mat(h, w, CV_8UC3, cv::Scalar(17, 128, 250)), cv::NORM_INF), 0.0)
        << w << "×" << h;
  }
  cv::Mat img(5, 6, CV_8UC3);
  cv::randu(img, 0, 256);
  const auto same = io::resize_bicubic_pil(img, 6, 5);
  EXPECT_EQ(cv::norm(same, img, cv::NORM_INF), 0.0);
  EXPECT_NE(same.data, img.data);
  EXPECT_THROW(io::resize_bicubic_pil(img, 0, 5), InvalidArgument);
  EXPECT_THROW(io::resize_bicubic_pil(cv::Mat(4, 4, CV_8UC1), 2, 2), InvalidArgument);
}

}  // namespace
}  // namespace vispco
