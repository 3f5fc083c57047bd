// A tiny random-weight LLaVA-NeXT ("tiny-next" preset) written once per test binary in the HF layout, and
// test images of several aspect ratios.
#pragma once
#include <ATen/ATen.h>

#include <opencv2/core.hpp>
#include <string>

#include "model/llava_next/presets.h"
#include "model/vlm.h"
#include "test_util.h"

namespace vispco::testing {

/// Folder of the tiny random LLaVA-NeXT (fp32 weights, seed 7), created on first use.
inline const std::string& tiny_next_dir() {
  return written_once([](const TempDir& dir) {
    write_random_llava_next(dir.str("tiny-next"), find_llava_next_preset("tiny-next").config, 7, at::kFloat);
    return dir.str("tiny-next");
  });
}

/// The tiny LLaVA-NeXT loaded on the CPU in `dtype`.
inline VisionLanguageModel load_tiny_next(c10::ScalarType dtype = at::kFloat) {
  RunContext ctx;
  ctx.dtype = dtype;
  return VisionLanguageModel::load(tiny_next_dir(), ctx);
}

/// A W×H RGB image with a smooth colour pattern plus a little deterministic texture (bicubic resizes of it
/// stay away from rounding ties).
inline cv::Mat pattern_image(int width, int height, int seed) {
  cv::Mat img(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      auto& p = img.at<cv::Vec3b>(y, x);
      p[0] = static_cast<uchar>((7 * x + 3 * seed) % 256);
      p[1] = static_cast<uchar>((5 * y + 11 * seed) % 256);
      p[2] = static_cast<uchar>((x * y + 13 * seed + (x ^ y)) % 256);
    }
  return img;
}

}  // namespace vispco::testing
