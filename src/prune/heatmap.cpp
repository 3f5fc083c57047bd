// Token heat-map rendering with OpenCV (JET colour map over score ranks, kept tokens outlined in white, tile
// lines in yellow).
#include "prune/heatmap.h"

#include <ATen/ATen.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace vispco {

namespace {

constexpr int kPanelGap = 8;  // pixels between panels

// Rank of each scored token in [0, 255] (−1 where not scored), over all tokens.
std::vector<int> rank_levels(const at::Tensor& sc) {
  std::vector<int> level(static_cast<size_t>(sc.numel()), -1);
  auto finite = sc.isnan().logical_not();
  const int64_t n_scored = finite.sum().item<int64_t>();
  if (n_scored == 0) return level;
  auto idx = at::nonzero(finite).squeeze(1);
  auto order = sc.index_select(0, idx).argsort();
  for (int64_t r = 0; r < n_scored; ++r)
    level[static_cast<size_t>(idx[order[r].item<int64_t>()].item<int64_t>())] =
        static_cast<int>(n_scored > 1 ? 255 * r / (n_scored - 1) : 255);
  return level;
}

// One panel drawn `height` pixels tall.
cv::Mat render_panel(const cv::Mat& bgr, const TokenPanel& p, const std::vector<int>& level,
                     const at::TensorAccessor<bool, 1>& kept, int height) {
  const int width = p.square ? height : std::max(1, int(std::lround(height * p.width / p.height)));
  const double ax = width / p.width, ay = height / p.height;  // image pixels → panel pixels
  const cv::Mat warp = (cv::Mat_<double>(2, 3) << ax, 0, -p.x0 * ax, 0, ay, -p.y0 * ay);
  cv::Mat out;
  cv::warpAffine(bgr, out, warp, cv::Size(width, height), cv::INTER_LINEAR, cv::BORDER_CONSTANT,
                 cv::Scalar(0, 0, 0));
  const double cw = double(width) / p.cols, ch = double(height) / p.rows;
  const auto cell = [&](int64_t r, int64_t c) {
    return cv::Rect(cv::Point(int(c * cw), int(r * ch)), cv::Point(int((c + 1) * cw), int((r + 1) * ch)));
  };
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c) {
      const int lv = level[static_cast<size_t>(p.token(r, c))];
      if (lv < 0) continue;
      cv::Mat one(1, 1, CV_8UC1, cv::Scalar(lv)), colour;
      cv::applyColorMap(one, colour, cv::COLORMAP_JET);
      cv::Mat roi = out(cell(r, c) & cv::Rect(0, 0, width, height));
      cv::addWeighted(roi, 0.5, cv::Mat(roi.size(), roi.type(), colour.at<cv::Vec3b>(0, 0)), 0.5, 0.0, roi);
    }
  for (double x : p.x_lines)
    cv::line(out, cv::Point(int((x - p.x0) * ax), 0), cv::Point(int((x - p.x0) * ax), height - 1),
             cv::Scalar(0, 255, 255), 2);
  for (double y : p.y_lines)
    cv::line(out, cv::Point(0, int((y - p.y0) * ay)), cv::Point(width - 1, int((y - p.y0) * ay)),
             cv::Scalar(0, 255, 255), 2);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      if (kept[p.token(r, c)]) {
        const auto rc = cell(r, c);
        cv::rectangle(out, rc.tl(), rc.br() - cv::Point(1, 1), cv::Scalar(255, 255, 255), 1);
      }
  return out;
}

}  // namespace

cv::Mat render_token_heatmap(const cv::Mat& rgb, const std::vector<TokenPanel>& panels,
                             const at::Tensor& scores, const at::Tensor& kept, int side) {
  auto sc = scores.to(at::kFloat).cpu().contiguous();
  auto kp = kept.to(at::kBool).cpu().contiguous();
  const int64_t n = sc.numel();
  if (kp.numel() != n)
    throw InvalidArgument("heat-map: " + std::to_string(n) + " scores but " + std::to_string(kp.numel()) +
                          " kept flags");
  for (const auto& p : panels)
    if (p.rows < 1 || p.cols < 1 || p.first < 0 || p.token(p.rows - 1, p.cols - 1) >= n)
      throw InvalidArgument("heat-map: a panel of " + std::to_string(p.rows) + "×" + std::to_string(p.cols) +
                            " cells from token " + std::to_string(p.first) + " does not fit " +
                            std::to_string(n) + " visual tokens");
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  const auto level = rank_levels(sc);
  const auto ka = kp.accessor<bool, 1>();
  std::vector<cv::Mat> drawn;
  for (const auto& p : panels) {
    if (!drawn.empty()) drawn.emplace_back(side, kPanelGap, CV_8UC3, cv::Scalar(255, 255, 255));
    drawn.push_back(render_panel(bgr, p, level, ka, side));
  }
  cv::Mat out;
  cv::hconcat(drawn, out);
  return out;
}

cv::Mat render_token_heatmap(const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                             const at::Tensor& kept, int side) {
  return render_token_heatmap(rgb, {square_token_panel(rgb.rows, rgb.cols, grid, grid, true)}, scores, kept,
                              side);
}

void write_token_heatmap(const std::string& path, const cv::Mat& rgb, const std::vector<TokenPanel>& panels,
                         const at::Tensor& scores, const at::Tensor& kept, int side) {
  auto img = render_token_heatmap(rgb, panels, scores, kept, side);
  bool ok = false;
  try {
    ok = cv::imwrite(path, img);
  } catch (const cv::Exception&) {
    ok = false;
  }
  if (!ok) throw IoError("cannot write heat-map '" + path + "' (folder missing or unknown image extension?)");
}

}  // namespace vispco
