// Token heat-map rendering with OpenCV (JET colour map over score ranks, kept patches outlined in white).
#include "prune/heatmap.h"

#include <ATen/ATen.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace vispco {

cv::Mat render_token_heatmap(const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                             const at::Tensor& kept, int side) {
  // Pad to square with black (the view the tower gets, up to the padding colour), then resize.
  const int s = std::max(rgb.cols, rgb.rows);
  cv::Mat square(s, s, CV_8UC3, cv::Scalar(0, 0, 0));
  rgb.copyTo(square(cv::Rect((s - rgb.cols) / 2, (s - rgb.rows) / 2, rgb.cols, rgb.rows)));
  cv::Mat base;
  cv::resize(square, base, cv::Size(side, side), 0, 0, cv::INTER_AREA);
  cv::cvtColor(base, base, cv::COLOR_RGB2BGR);

  auto sc = scores.to(at::kFloat).cpu().contiguous();
  auto kp = kept.to(at::kBool).cpu().contiguous();
  const int64_t n = grid * grid;
  TORCH_CHECK(sc.numel() == n && kp.numel() == n, "heat-map needs ", n, " scores and kept flags");
  // Rank-normalise the scored patches to [0, 255].
  auto finite = sc.isnan().logical_not();
  const int64_t n_scored = finite.sum().item<int64_t>();
  cv::Mat level(static_cast<int>(grid), static_cast<int>(grid), CV_8UC1, cv::Scalar(0));
  cv::Mat scored(static_cast<int>(grid), static_cast<int>(grid), CV_8UC1, cv::Scalar(0));
  if (n_scored > 0) {
    auto idx = at::nonzero(finite).squeeze(1);
    auto order = sc.index_select(0, idx).argsort();
    for (int64_t r = 0; r < n_scored; ++r) {
      const int64_t p = idx[order[r].item<int64_t>()].item<int64_t>();
      level.at<uint8_t>(p / grid, p % grid) =
          static_cast<uint8_t>(n_scored > 1 ? 255 * r / (n_scored - 1) : 255);
      scored.at<uint8_t>(p / grid, p % grid) = 255;
    }
  }
  cv::Mat colour, big_scored;
  cv::applyColorMap(level, colour, cv::COLORMAP_JET);
  cv::resize(colour, colour, cv::Size(side, side), 0, 0, cv::INTER_NEAREST);
  cv::resize(scored, big_scored, cv::Size(side, side), 0, 0, cv::INTER_NEAREST);
  cv::Mat blended;
  cv::addWeighted(base, 0.5, colour, 0.5, 0.0, blended);
  blended.copyTo(base, big_scored);
  const double cell = double(side) / grid;
  auto ka = kp.accessor<bool, 1>();
  for (int64_t p = 0; p < n; ++p)
    if (ka[p]) {
      const cv::Point a(int((p % grid) * cell), int((p / grid) * cell));
      const cv::Point b(int((p % grid + 1) * cell) - 1, int((p / grid + 1) * cell) - 1);
      cv::rectangle(base, a, b, cv::Scalar(255, 255, 255), 1);
    }
  return base;
}

void write_token_heatmap(const std::string& path, const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                         const at::Tensor& kept, int side) {
  auto img = render_token_heatmap(rgb, grid, scores, kept, side);
  bool ok = false;
  try {
    ok = cv::imwrite(path, img);
  } catch (const cv::Exception&) {
    ok = false;
  }
  if (!ok) throw IoError("cannot write heat-map '" + path + "' (folder missing or unknown image extension?)");
}

}  // namespace vispco
