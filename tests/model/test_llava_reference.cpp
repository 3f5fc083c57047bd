// vispco's LLaVA-1.5 forward against an independent float64 PyTorch implementation of transformers' semantics
// (tests/reference/llava_reference.py, sharing no code with vispco) on random tiny checkpoints of both
// tokenizer kinds: "<image>" after the SentencePiece vocabulary (HF llava-1.5: 32000) and inside it (a
// user-defined piece). Compared: the projected image features, the logits at the last prompt position and
// the greedy tokens. Skipped with a message where python3 with torch is absent.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "io/image.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "model/python_reference.h"
#include "model/tiny_model.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

// A 56 × 56 binary PPM with a smooth colour pattern (no resize on either side: CLIP's bicubic resize differs
// between PIL and OpenCV, so the comparison starts after it).
void write_ppm(const fs::path& p) {
  std::ofstream f(p, std::ios::binary);
  f << "P6\n56 56\n255\n";
  for (int y = 0; y < 56; ++y)
    for (int x = 0; x < 56; ++x) {
      const unsigned char rgb[3] = {static_cast<unsigned char>(4 * x), static_cast<unsigned char>(4 * y),
                                    static_cast<unsigned char>((x * y) % 256)};
      f.write(reinterpret_cast<const char*>(rgb), 3);
    }
}

void compare_with_reference(int64_t image_token_index) {
  const auto py = testing::python_with_torch();
  if (py.empty()) GTEST_SKIP() << "python3 with torch not found (Debian: apt-get install python3-torch)";
  testing::TempDir tmp;
  auto cfg = find_preset("tiny").config;
  cfg.image_token_index = image_token_index;
  write_random_llava(tmp.str("m"), cfg, 11, at::kFloat);
  write_ppm(tmp.path() / "img.ppm");
  auto m = VisionLanguageModel::load(tmp.str("m"), RunContext{});
  const auto pixels = m.preprocess(io::load_image_rgb(tmp.str("img.ppm")));
  const auto embeds = m.encode_images(pixels.unsqueeze(0)).embeds[0].to(at::kDouble);  // [N_v, D]
  const auto ids = m.prompt_ids("What colour is the cube?");
  auto out = generate(m, {{pixels, ids}}, testing::greedy(4), nullptr, /*record_logits=*/true);

  const auto script =
      fs::path(::vispco::testing::source_dir()) / "tests" / "reference" / "llava_reference.py";
  const auto text = testing::run_command(py + " " + script.string() + " " + tmp.str("m") + " " +
                                         tmp.str("img.ppm") + " " + testing::comma_joined(ids) + " 4");
  testing::expect_matches_reference("image_token_index " + std::to_string(image_token_index),
                                    nlohmann::json::parse(text), embeds, out);
}

TEST(LlavaReference, ImageTokenAfterTheVocabularyMatchesTheFloat64Reference) {
  compare_with_reference(find_preset("tiny").config.image_token_index);
}

TEST(LlavaReference, ImageTokenInsideTheVocabularyMatchesTheFloat64Reference) {
  compare_with_reference(kImageTokenInsideVocab);
}

}  // namespace
}  // namespace vispco
