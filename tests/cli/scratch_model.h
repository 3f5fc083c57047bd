// The CLI tests' scratch folder: a copy of the tiny model that a test may change (train-gate writes into it,
// a test may damage it) and a plain-colour image beside it.
#pragma once
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco::testing {

struct ScratchModel {
  TempDir tmp;
  std::filesystem::path model = tmp.path() / "model";
  std::filesystem::path image = tmp.path() / "img.png";
  /// @param bgr the image's colour (60×40 px).
  explicit ScratchModel(const cv::Scalar& bgr) {
    std::filesystem::copy(tiny_model_dir(), model);
    cv::imwrite(image.string(), cv::Mat(40, 60, CV_8UC3, bgr));
  }
};

}  // namespace vispco::testing
