// LLaVA-NeXT's image processor; see image_processor.h.
#include "model/llava_next/image_processor.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "io/pil_resize.h"

namespace vispco {

namespace {

constexpr float kSizeMarker = 11.0f;  // first value of a size slice
constexpr int kDigits = 4;            // hexadecimal digits per side

// Pillow's bicubic resize, as transformers' resize() calls it (a copy when the size is already that).
cv::Mat resize_bicubic(const cv::Mat& rgb, int64_t width, int64_t height) {
  return io::resize_bicubic_pil(rgb, static_cast<int>(width), static_cast<int>(height));
}

}  // namespace

AnyresImages anyres_images(const cv::Mat& rgb, const LlavaNextConfig& cfg) {
  if (rgb.empty() || rgb.type() != CV_8UC3)
    throw InvalidArgument("LLaVA-NeXT preprocessing: expected a non-empty 8-bit RGB image (CV_8UC3)");
  AnyresImages out;
  out.geometry = anyres_geometry(rgb.rows, rgb.cols, cfg);
  const auto& c = out.geometry.canvas;
  const int64_t s = cfg.llava.vision.image_size;
  out.base = resize_bicubic(rgb, s, s);
  out.resized = resize_bicubic(rgb, c.resized.width, c.resized.height);
  out.canvas = cv::Mat(int(c.canvas.height), int(c.canvas.width), CV_8UC3, cv::Scalar::all(0));
  out.resized.copyTo(out.canvas(cv::Rect(int(c.left), int(c.top), out.resized.cols, out.resized.rows)));
  return out;
}

at::Tensor anyres_preprocess(const cv::Mat& rgb, const LlavaNextConfig& cfg,
                             const io::ImagePreprocessConfig& pre) {
  const AnyresImages im = anyres_images(rgb, cfg);
  const int s = static_cast<int>(cfg.llava.vision.image_size);
  io::ImagePreprocessConfig norm = pre;  // each picture is already S × S: rescale and normalise only
  norm.image_size = s;
  norm.pad_to_square = false;
  std::vector<at::Tensor> slices{io::preprocess_llava(im.base, norm)};
  const auto& g = im.geometry;
  for (int64_t i = 0; i < g.tile_rows; ++i)
    for (int64_t j = 0; j < g.tile_cols; ++j)
      slices.push_back(io::preprocess_llava(im.canvas(cv::Rect(int(j) * s, int(i) * s, s, s)), norm));
  slices.push_back(image_size_slice(rgb.rows, rgb.cols, s));
  return at::stack(slices, 0);
}

at::Tensor image_size_slice(int64_t height, int64_t width, int64_t image_size) {
  if (height < 1 || width < 1 || height > kMaxAnyresImageSide || width > kMaxAnyresImageSide)
    throw InvalidArgument("LLaVA-NeXT preprocessing: image size " + std::to_string(width) + "×" +
                          std::to_string(height) + " is outside 1.." + std::to_string(kMaxAnyresImageSide) +
                          " pixels a side");
  if (image_size < 1 + 2 * kDigits)
    throw InvalidArgument("image_size_slice: image_size " + std::to_string(image_size) + " < 9");
  auto slice = at::zeros({3, image_size, image_size}, at::kFloat);
  auto row = slice[0][0];
  row[0] = kSizeMarker;
  for (int d = 0; d < kDigits; ++d) {
    const int shift = 4 * (kDigits - 1 - d);
    row[1 + d] = double((height >> shift) & 15);
    row[1 + kDigits + d] = double((width >> shift) & 15);
  }
  return slice;
}

std::pair<int64_t, int64_t> decode_image_size_slice(const at::Tensor& slice) {
  if (slice.dim() != 3 || slice.size(2) < 1 + 2 * kDigits)
    throw InvalidArgument("LLaVA-NeXT pixels: the last slice is not an image-size slice (shape " +
                          std::to_string(slice.dim()) + "-d)");
  const auto v = slice[0][0].narrow(0, 0, 1 + 2 * kDigits).to(at::kCPU, at::kDouble).contiguous();
  const double* p = v.data_ptr<double>();
  auto digit = [&](int i) {
    const double x = p[i];
    if (!(x >= 0.0 && x <= 15.0 && x == double(int64_t(x))))
      throw InvalidArgument("LLaVA-NeXT pixels: the image-size slice holds " + std::to_string(x) +
                            " where a hexadecimal digit belongs (pixels not made by this family's "
                            "preprocess?)");
    return int64_t(x);
  };
  if (p[0] != kSizeMarker)
    throw InvalidArgument(
        "LLaVA-NeXT pixels: the last slice carries no image size (marker missing: pixels not made by "
        "this family's preprocess, [1 + tiles + 1, 3, S, S])");
  int64_t h = 0, w = 0;
  for (int d = 0; d < kDigits; ++d) {
    h = h * 16 + digit(1 + d);
    w = w * 16 + digit(1 + kDigits + d);
  }
  if (h < 1 || w < 1) throw InvalidArgument("LLaVA-NeXT pixels: the image-size slice says 0 pixels");
  return {h, w};
}

}  // namespace vispco
