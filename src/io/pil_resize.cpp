// Pillow's bicubic resize; see pil_resize.h. Written from Pillow's libImaging/Resample.c (precompute_coeffs,
// normalize_coeffs_8bpc, ImagingResampleHorizontal_8bpc / Vertical_8bpc), box = the whole image.
#include "io/pil_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"

namespace vispco::io {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

double bicubic(double x) {  // Pillow's bicubic_filter, a = −0.5, support 2
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// One output sample's taps: input indices [first, first + weights.size()) with fixed-point weights.
struct Taps {
  int first = 0;
  std::vector<int32_t> weights;
};

// precompute_coeffs + normalize_coeffs_8bpc for in_size → out_size samples.
std::vector<Taps> coefficients(int in_size, int out_size) {
  const double scale = double(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  std::vector<Taps> out(static_cast<size_t>(out_size));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);  // C truncation, as Pillow
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    std::vector<double> k(size_t(std::max(xmax, 0)));
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[size_t(x)] = bicubic((x + xmin - center + 0.5) * ss);
      ww += k[size_t(x)];
    }
    auto& t = out[size_t(xx)];
    t.first = xmin;
    for (double w : k) {
      if (ww != 0.0) w /= ww;
      const double fixed = w * double(1 << kPrecisionBits);
      t.weights.push_back(static_cast<int32_t>(w < 0 ? -0.5 + fixed : 0.5 + fixed));
    }
  }
  return out;
}

uint8_t clip8(int32_t v) {
  const int32_t shifted = v >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's lookup table
  return static_cast<uint8_t>(std::clamp(shifted, 0, 255));
}

// One pass along x (horizontal) or y (vertical) of an 8-bit 3-channel image.
cv::Mat pass(const cv::Mat& in, int out_size, bool horizontal) {
  const int in_size = horizontal ? in.cols : in.rows;
  const auto taps = coefficients(in_size, out_size);
  cv::Mat out(horizontal ? in.rows : out_size, horizontal ? out_size : in.cols, CV_8UC3);
  for (int y = 0; y < out.rows; ++y) {
    auto* dst = out.ptr<uint8_t>(y);
    for (int x = 0; x < out.cols; ++x) {
      const Taps& t = taps[size_t(horizontal ? x : y)];
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (size_t i = 0; i < t.weights.size(); ++i) {
        const int j = t.first + int(i);
        const uint8_t* src = horizontal ? in.ptr<uint8_t>(y) + 3 * j : in.ptr<uint8_t>(j) + 3 * x;
        for (int c = 0; c < 3; ++c) acc[c] += int32_t(src[c]) * t.weights[i];
      }
      for (int c = 0; c < 3; ++c) dst[3 * x + c] = clip8(acc[c]);
    }
  }
  return out;
}

}  // namespace

cv::Mat resize_bicubic_pil(const cv::Mat& rgb, int width, int height) {
  if (rgb.empty() || rgb.type() != CV_8UC3)
    throw InvalidArgument("resize_bicubic_pil: expected a non-empty 8-bit RGB image (CV_8UC3)");
  if (width < 1 || height < 1)
    throw InvalidArgument("resize_bicubic_pil: target size " + std::to_string(width) + "×" +
                          std::to_string(height) + " must be positive");
  cv::Mat out = rgb;
  if (width != rgb.cols) out = pass(out, width, /*horizontal=*/true);  // Pillow: horizontal first
  if (height != rgb.rows) out = pass(out, height, /*horizontal=*/false);
  return out.data == rgb.data ? rgb.clone() : out;
}

}  // namespace vispco::io
