// Tests of image decoding (formats, colour order, errors) and LLaVA preprocessing on hand-built images
// whose padded result is predictable pixel by pixel (LLaVA expand2square semantics).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "core/errors.h"
#include "io/image.h"

namespace vispco::io {
namespace {

namespace fs = std::filesystem;
using Rgb = std::array<uint8_t, 3>;

/// Mean/std with exact padding colours: int(mean·255) = (127, 63, 0).
ImagePreprocessConfig simple_config(int image_size) {
  ImagePreprocessConfig cfg;
  cfg.image_size = image_size;
  cfg.mean = {0.5f, 0.25f, 0.0f};
  cfg.std = {0.5f, 0.25f, 1.0f};
  return cfg;
}

/// RGB CV_8UC3 image from rows of pixels.
cv::Mat make_rgb(const std::vector<std::vector<Rgb>>& rows) {
  cv::Mat m(static_cast<int>(rows.size()), static_cast<int>(rows[0].size()), CV_8UC3);
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x)
      for (int c = 0; c < 3; ++c) m.at<cv::Vec3b>(y, x)[c] = rows[y][x][c];
  return m;
}

/// Expected [3, S, S] tensor from hand-written padded RGB pixels: (v/255 − mean)/std.
at::Tensor expected_tensor(const std::vector<std::vector<Rgb>>& px, const ImagePreprocessConfig& cfg) {
  const int s = static_cast<int>(px.size());
  at::Tensor t = at::empty({3, s, s}, at::kFloat);
  auto acc = t.accessor<float, 3>();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < s; ++y)
      for (int x = 0; x < s; ++x) acc[c][y][x] = (px[y][x][c] / 255.0f - cfg.mean[c]) / cfg.std[c];
  return t;
}

void expect_close(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const double max_diff = (got - want).abs().max().item<double>();
  EXPECT_LE(max_diff, 1e-6) << "max |got − want| = " << max_diff;
}

constexpr Rgb kPad{127, 63, 0};

TEST(Preprocess, PadsWideImageAtTopWithOddRemainderBelow) {
  // W=3, H=2 → side 3, paste at (0, (3−2)/2 = 0): the padding row is the bottom one. S=3: no resize.
  const Rgb a{255, 0, 0}, b{0, 255, 0}, c{0, 0, 255}, d{10, 20, 30}, e{200, 100, 50}, f{255, 255, 255};
  const cv::Mat img = make_rgb({{a, b, c}, {d, e, f}});
  const auto cfg = simple_config(3);
  expect_close(preprocess_llava(img, cfg), expected_tensor({{a, b, c}, {d, e, f}, {kPad, kPad, kPad}}, cfg));
}

TEST(Preprocess, PadsTallImageOnRightWithOddRemainder) {
  // W=2, H=3 → paste at ((3−2)/2 = 0, 0): the padding column is the right one.
  const Rgb a{1, 2, 3}, b{4, 5, 6}, c{7, 8, 9}, d{10, 11, 12}, e{13, 14, 15}, f{16, 17, 18};
  const cv::Mat img = make_rgb({{a, b}, {c, d}, {e, f}});
  const auto cfg = simple_config(3);
  expect_close(preprocess_llava(img, cfg), expected_tensor({{a, b, kPad}, {c, d, kPad}, {e, f, kPad}}, cfg));
}

TEST(Preprocess, CentresImageWithFloorOffset) {
  // W=4, H=1 → side 4, paste at (0, (4−1)/2 = 1): one padding row above, two below.
  const Rgb a{0, 0, 0}, b{50, 60, 70}, c{80, 90, 100}, f{255, 255, 255};
  const cv::Mat img = make_rgb({{a, b, c, f}});
  const auto cfg = simple_config(4);
  const std::vector<Rgb> pad_row(4, kPad);
  expect_close(preprocess_llava(img, cfg), expected_tensor({pad_row, {a, b, c, f}, pad_row, pad_row}, cfg));
}

TEST(Preprocess, PaddingColourIsTruncatedMeanTimes255) {
  // CLIP mean → int(mean·255) = (122, 116, 104), as LLaVA's tuple(int(x*255) for x in image_mean).
  ImagePreprocessConfig cfg;
  cfg.image_size = 2;
  const cv::Mat img = make_rgb({{Rgb{0, 0, 0}, Rgb{0, 0, 0}}});
  const at::Tensor t = preprocess_llava(img, cfg);
  const Rgb clip_pad{122, 116, 104};
  expect_close(t, expected_tensor({{Rgb{0, 0, 0}, Rgb{0, 0, 0}}, {clip_pad, clip_pad}}, cfg));
  EXPECT_NEAR(t[0][0][0].item<float>(), -0.48145466f / 0.26862954f, 1e-6);
}

TEST(Preprocess, NoPaddingWhenDisabled) {
  auto cfg = simple_config(3);
  cfg.pad_to_square = false;
  const Rgb v{100, 100, 100};
  const cv::Mat img = make_rgb({{v, v, v}, {v, v, v}});  // stretched to 3×3, constant stays constant
  const at::Tensor t = preprocess_llava(img, cfg);
  expect_close(t, expected_tensor(std::vector<std::vector<Rgb>>(3, std::vector<Rgb>(3, v)), cfg));
}

TEST(Preprocess, ResizesToImageSizeAsContiguousFloat32) {
  // A constant image in the padding colour stays constant through pad + bicubic resize.
  const cv::Mat img(5, 7, CV_8UC3, cv::Scalar(127, 63, 0));
  const auto cfg = simple_config(336);
  const at::Tensor t = preprocess_llava(img, cfg);
  EXPECT_EQ(t.sizes(), (at::IntArrayRef{3, 336, 336}));
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.device().is_cpu());
  std::vector<std::vector<Rgb>> flat(336, std::vector<Rgb>(336, kPad));
  expect_close(t, expected_tensor(flat, cfg));
}

TEST(Preprocess, ResizesAsPillowsBicubic) {
  // Each row [0, 100, 200, 255] (channels v, v, 255 − v), 4 × 4 → 2 × 2: Pillow's bicubic gives [60, 221] and
  // [195, 34] per row (worked out in tests/io/test_pil_resize.cpp); the rows are equal, so the vertical pass
  // keeps them. OpenCV's INTER_CUBIC would give other values.
  const Rgb p0{0, 0, 255}, p1{100, 100, 155}, p2{200, 200, 55}, p3{255, 255, 0};
  const cv::Mat img = make_rgb(std::vector<std::vector<Rgb>>(4, {p0, p1, p2, p3}));
  const auto cfg = simple_config(2);
  const Rgb a{60, 60, 195}, b{221, 221, 34};
  expect_close(preprocess_llava(img, cfg), expected_tensor({{a, b}, {a, b}}, cfg));
}

TEST(Preprocess, RejectsBadInputs) {
  EXPECT_THROW(preprocess_llava(cv::Mat(), simple_config(3)), InvalidArgument);
  EXPECT_THROW(preprocess_llava(cv::Mat(2, 2, CV_8UC1, cv::Scalar(0)), simple_config(3)), InvalidArgument);
  const cv::Mat img(2, 2, CV_8UC3, cv::Scalar(0, 0, 0));
  EXPECT_THROW(preprocess_llava(img, simple_config(0)), InvalidArgument);
  auto cfg = simple_config(3);
  cfg.std[1] = 0.0f;
  EXPECT_THROW(preprocess_llava(img, cfg), InvalidArgument);
}

/// Per-test temporary folder.
class ImageFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("vispco_image_" + std::string(info->name()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// Writes a flat BGR(A)/grey image with OpenCV and loads it back through load_image_rgb.
  cv::Mat round_trip(const std::string& name, const cv::Mat& written) {
    const std::string p = path(name);
    EXPECT_TRUE(cv::imwrite(p, written)) << p;
    return load_image_rgb(p);
  }
  fs::path dir_;
};

void expect_flat_rgb(const cv::Mat& rgb, int rows, int cols, Rgb want, int tol) {
  ASSERT_EQ(rgb.type(), CV_8UC3);
  ASSERT_EQ(rgb.rows, rows);
  ASSERT_EQ(rgb.cols, cols);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_NEAR(rgb.at<cv::Vec3b>(y, x)[c], want[c], tol) << "pixel (" << y << ", " << x << ") ch " << c;
}

TEST_F(ImageFiles, PngRoundTripIsRgbOrder) {
  const cv::Mat red_bgr(1, 1, CV_8UC3, cv::Scalar(0, 0, 255));  // OpenCV writes BGR
  const cv::Mat rgb = round_trip("red.png", red_bgr);
  expect_flat_rgb(rgb, 1, 1, Rgb{255, 0, 0}, 0);
}

TEST_F(ImageFiles, LoadsJpegBmpWebp) {
  const cv::Mat bgr(16, 24, CV_8UC3, cv::Scalar(30, 90, 200));  // RGB (200, 90, 30)
  expect_flat_rgb(round_trip("a.bmp", bgr), 16, 24, Rgb{200, 90, 30}, 0);
  expect_flat_rgb(round_trip("a.jpg", bgr), 16, 24, Rgb{200, 90, 30}, 4);  // lossy
  if (!cv::haveImageWriter(".webp")) GTEST_SKIP() << "OpenCV built without WebP";
  expect_flat_rgb(round_trip("a.webp", bgr), 16, 24, Rgb{200, 90, 30}, 4);
}

TEST_F(ImageFiles, ConvertsGreyAndDropsAlpha) {
  expect_flat_rgb(round_trip("g.png", cv::Mat(3, 2, CV_8UC1, cv::Scalar(77))), 3, 2, Rgb{77, 77, 77}, 0);
  const cv::Mat bgra(2, 3, CV_8UC4, cv::Scalar(10, 20, 30, 40));
  expect_flat_rgb(round_trip("a.png", bgra), 2, 3, Rgb{30, 20, 10}, 0);
}

TEST_F(ImageFiles, DecodesBytesInMemory) {
  std::vector<uint8_t> buf;
  ASSERT_TRUE(cv::imencode(".png", cv::Mat(1, 2, CV_8UC3, cv::Scalar(255, 0, 0)), buf));
  expect_flat_rgb(decode_image_rgb(std::string(buf.begin(), buf.end())), 1, 2, Rgb{0, 0, 255}, 0);
  EXPECT_THROW(decode_image_rgb(""), FormatError);
  EXPECT_THROW(decode_image_rgb("definitely not an image"), FormatError);
}

TEST_F(ImageFiles, CorruptFileIsFormatErrorNamingPath) {
  const std::string p = path("corrupt.png");
  std::mt19937 rng(7);
  {
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 512; ++i) out.put(static_cast<char>(rng() & 0xff));
  }
  try {
    load_image_rgb(p);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a decodable image"), std::string::npos) << e.what();
  }
}

TEST_F(ImageFiles, MissingFileIsIoErrorNamingPath) {
  const std::string p = path("missing.png");
  try {
    load_image_rgb(p);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_image_rgb(dir_.string()), IoError);  // a directory is not an image file
}

}  // namespace
}  // namespace vispco::io
