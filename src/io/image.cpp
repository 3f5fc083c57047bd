// Image decoding with OpenCV and LLaVA-1.5 preprocessing (expand2square, bicubic resize, CLIP mean/std).
// Reference: LLaVA `llava/mm_utils.py` expand2square; HF `CLIPImageProcessor` rescale + normalize.
#include "io/image.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/errors.h"
#include "io/pil_resize.h"

namespace vispco::io {
namespace {

/// Reads a whole file into a byte string. @throws IoError when missing, a directory or unreadable.
std::string read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw IoError("image file not found: '" + path + "'");
  if (std::filesystem::is_directory(path, ec))
    throw IoError("image path is a directory, expected a file: '" + path + "'");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open image file for reading: '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("error while reading image file: '" + path + "'");
  return bytes;
}

/// Decodes bytes to RGB CV_8UC3, or returns an empty Mat when OpenCV cannot decode them.
cv::Mat try_decode_rgb(const std::string& bytes) {
  if (bytes.empty()) return {};
  const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  // IMREAD_COLOR: grey is replicated, alpha dropped (as PIL's convert("RGB")), 16-bit reduced to 8-bit,
  // EXIF orientation applied (as HF's load_image with exif_transpose).
  cv::Mat bgr;
  try {
    bgr = cv::imdecode(buf, cv::IMREAD_COLOR);
  } catch (const cv::Exception&) {
    return {};
  }
  if (bgr.empty()) return {};
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

constexpr const char* kFormatHint = "not a decodable image (JPEG, PNG, WebP, BMP)";

/// LLaVA expand2square: centred on a square of side max(W, H) filled with int(mean·255); offset uses floor
/// division, so an odd remainder lands on the right/bottom. Returns `rgb` itself when already square.
cv::Mat expand_to_square(const cv::Mat& rgb, const std::array<float, 3>& mean) {
  const int w = rgb.cols, h = rgb.rows;
  if (w == h) return rgb;
  const int side = std::max(w, h);
  cv::Scalar fill;
  for (int c = 0; c < 3; ++c) fill[c] = static_cast<int>(static_cast<double>(mean[c]) * 255.0);
  cv::Mat square(side, side, CV_8UC3, fill);
  rgb.copyTo(square(cv::Rect((side - w) / 2, (side - h) / 2, w, h)));
  return square;
}

void validate(const cv::Mat& rgb, const ImagePreprocessConfig& cfg) {
  if (rgb.empty()) throw InvalidArgument("preprocess_llava: empty image");
  if (rgb.type() != CV_8UC3) {
    std::ostringstream msg;
    msg << "preprocess_llava: expected an 8-bit RGB image (CV_8UC3), got OpenCV type " << rgb.type()
        << " with " << rgb.channels() << " channel(s); load it with load_image_rgb";
    throw InvalidArgument(msg.str());
  }
  if (cfg.image_size < 1)
    throw InvalidArgument("preprocess_llava: image_size must be >= 1, got " + std::to_string(cfg.image_size));
  for (int c = 0; c < 3; ++c) {
    if (!(cfg.std[c] > 0.0f))
      throw InvalidArgument("preprocess_llava: std[" + std::to_string(c) + "] must be > 0, got " +
                            std::to_string(cfg.std[c]));
  }
}

}  // namespace

cv::Mat decode_image_rgb(const std::string& bytes) {
  cv::Mat rgb = try_decode_rgb(bytes);
  if (rgb.empty())
    throw FormatError("image bytes (" + std::to_string(bytes.size()) + " bytes) are " + kFormatHint);
  return rgb;
}

cv::Mat load_image_rgb(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  cv::Mat rgb = try_decode_rgb(bytes);
  if (rgb.empty()) throw FormatError("'" + path + "' is " + kFormatHint);
  return rgb;
}

at::Tensor preprocess_llava(const cv::Mat& rgb, const ImagePreprocessConfig& cfg) {
  validate(rgb, cfg);
  const cv::Mat padded = cfg.pad_to_square ? expand_to_square(rgb, cfg.mean) : rgb;
  const int s = cfg.image_size;
  // Pillow's bicubic, as transformers' CLIPImageProcessor resizes (OpenCV's INTER_CUBIC differs by a grey
  // level on 10–30 % of pixels of ordinary images; issue 48).
  const cv::Mat resized = padded.cols != s || padded.rows != s ? resize_bicubic_pil(padded, s, s) : padded;

  // [3, S, S] float32: (x/255 − mean)/std, channel-first.
  at::Tensor out = at::empty({3, s, s}, at::TensorOptions().dtype(at::kFloat));
  float* dst = out.data_ptr<float>();
  const int64_t plane = static_cast<int64_t>(s) * s;
  for (int y = 0; y < s; ++y) {
    const uint8_t* row = resized.ptr<uint8_t>(y);
    for (int x = 0; x < s; ++x) {
      for (int c = 0; c < 3; ++c) {
        const float v = static_cast<float>(row[3 * x + c]) / 255.0f;
        dst[c * plane + static_cast<int64_t>(y) * s + x] = (v - cfg.mean[c]) / cfg.std[c];
      }
    }
  }
  return out;
}

}  // namespace vispco::io
