// read_image_header against images OpenCV encodes at known sizes (an independent writer), and against
// truncated and foreign bytes.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "io/image_header.h"

namespace vispco::io {
namespace {

std::string encode(const std::string& ext, int w, int h, std::vector<int> params = {}) {
  cv::Mat img(h, w, CV_8UC3, cv::Scalar(10, 200, 30));
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, img, buf, params)) << ext;
  return std::string(buf.begin(), buf.end());
}

TEST(ImageHeader, ReadsTheSizeEveryFormatDeclares) {
  struct Case {
    std::string ext, format;
    std::vector<int> params;
  };
  const std::vector<Case> cases = {
      {".png", "png", {}},
      {".jpg", "jpeg", {}},
      {".jpg", "jpeg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},  // SOF2
      {".webp", "webp", {cv::IMWRITE_WEBP_QUALITY, 80}},    // lossy: "VP8 "
      {".webp", "webp", {cv::IMWRITE_WEBP_QUALITY, 101}},   // lossless: "VP8L"
      {".bmp", "bmp", {}},
  };
  for (const auto& c : cases)
    for (const auto& [w, h] : std::vector<std::pair<int, int>>{{37, 23}, {23, 37}, {300, 1}}) {
      const auto hd = read_image_header(encode(c.ext, w, h, c.params));
      EXPECT_EQ(hd.format, c.format) << c.ext;
      EXPECT_EQ(hd.width, w) << c.ext << " " << w << "x" << h;
      EXPECT_EQ(hd.height, h) << c.ext << " " << w << "x" << h;
    }
}

TEST(ImageHeader, AHugeDeclaredSideIsReadWithoutDecoding) {
  // A 65536 × 256 grey PNG is tens of KB; its header says what decoding would allocate.
  cv::Mat wide(256, 65536, CV_8UC1, cv::Scalar(0));
  std::vector<uchar> buf;
  cv::imencode(".png", wide, buf);
  const auto hd = read_image_header(std::string(buf.begin(), buf.end()));
  EXPECT_EQ(hd.width, 65536);
  EXPECT_EQ(hd.height, 256);
}

TEST(ImageHeader, TruncatedAndForeignBytesAreFormatErrors) {
  const auto png = encode(".png", 8, 8);
  EXPECT_THROW(read_image_header(png.substr(0, 20)), FormatError);
  const auto jpg = encode(".jpg", 8, 8);
  EXPECT_THROW(read_image_header(jpg.substr(0, 40)), FormatError);  // cut before the frame header
  EXPECT_THROW(read_image_header("GIF89a\x01\x00\x01\x00"), FormatError);
  EXPECT_THROW(read_image_header(""), FormatError);
  EXPECT_THROW(read_image_header("not an image at all"), FormatError);
  std::string zero = png;
  for (int i = 16; i < 20; ++i) zero[i] = 0;  // width 0
  EXPECT_THROW(read_image_header(zero), FormatError);
}

}  // namespace
}  // namespace vispco::io
