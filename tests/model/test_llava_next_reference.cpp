// vispco's LLaVA-NeXT forward against an independent float64 PyTorch implementation of transformers v4.52's
// semantics (tests/reference/llava_next_reference.py: best resolution, padding, tiles, normalisation, tower,
// projector, packing with unpadding and image_newline, Llama decoder; sharing no code with vispco) on the
// tiny random LLaVA-NeXT, for images of three aspect ratios: columns trimmed (60×50, 2 tiles side by side),
// an odd column trim (15×100, 2 tiles stacked) and rows trimmed (100×70, 2×2 tiles). Compared with
// LLaVA-1.5's tolerances: the packed image features, the logits at the last prompt position and the greedy
// tokens. The resizes are vispco's on both sides (PIL and OpenCV bicubic differ). Skipped with a message
// where python3 with torch is absent.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/generate.h"
#include "model/llava_next/image_processor.h"
#include "model/llava_next_model.h"
#include "model/python_reference.h"
#include "model/tiny_model.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

void write_ppm(const fs::path& p, const cv::Mat& rgb) {
  std::ofstream f(p, std::ios::binary);
  f << "P6\n" << rgb.cols << " " << rgb.rows << "\n255\n";
  for (int y = 0; y < rgb.rows; ++y) f.write(reinterpret_cast<const char*>(rgb.ptr<uchar>(y)), rgb.cols * 3);
}

void compare_with_reference(int width, int height, int64_t want_tiles, int64_t want_n) {
  const auto py = testing::python_with_torch();
  if (py.empty()) GTEST_SKIP() << "python3 with torch not found (Debian: apt-get install python3-torch)";
  testing::TempDir tmp;
  auto m = testing::load_tiny_next();
  const auto img = testing::pattern_image(width, height, 21);
  const auto im = anyres_images(img, find_llava_next_preset("tiny-next").config);
  write_ppm(tmp.path() / "base.ppm", im.base);
  write_ppm(tmp.path() / "resized.ppm", im.resized);
  const auto pixels = m.preprocess(img);
  at::Tensor embeds;
  {
    c10::InferenceMode guard;
    embeds = m.encode_image_list({pixels}).embeds[0].to(at::kDouble);  // [N_v, D]
  }
  ASSERT_EQ(embeds.size(0), want_n);
  const auto ids = m.prompt_ids("What colour is the cube?");
  auto out = generate(m, {{pixels, ids}}, testing::greedy(4), nullptr, /*record_logits=*/true);

  const auto script =
      fs::path(::vispco::testing::source_dir()) / "tests" / "reference" / "llava_next_reference.py";
  const auto text =
      testing::run_command(py + " " + script.string() + " " + testing::tiny_next_dir() + " " +
                           std::to_string(height) + " " + std::to_string(width) + " " + tmp.str("base.ppm") +
                           " " + tmp.str("resized.ppm") + " " + testing::comma_joined(ids) + " 4");
  const auto ref = nlohmann::json::parse(text);
  EXPECT_EQ(ref["n_tiles"].get<int64_t>(), want_tiles);
  testing::expect_matches_reference(
      std::to_string(width) + "×" + std::to_string(height) + ": N_v " + std::to_string(embeds.size(0)), ref,
      embeds, out);
}

// Geometry worked by hand in test_llava_next_anyres.cpp: 60×50 → 56×112, columns [2, 6): 16 + 4·5 = 36.
TEST(LlavaNextReference, ColumnsTrimmedMatchTheFloat64Reference) { compare_with_reference(60, 50, 2, 36); }

// 15×100 → 112×56, columns [1, 3) of 4 (new_w = 1, the odd difference keeps 2): 16 + 8·3 = 40.
TEST(LlavaNextReference, AnOddTrimMatchesTheFloat64Reference) { compare_with_reference(15, 100, 2, 40); }

// 100×70 → 112×112 (2×2 tiles), rows: new_h = int(70·8/100) = 5, p = 1 → rows [1, 7): 16 + 6·9 = 70.
TEST(LlavaNextReference, RowsTrimmedMatchTheFloat64Reference) { compare_with_reference(100, 70, 4, 70); }

}  // namespace
}  // namespace vispco
