// Small hand-made VQA datasets for evaluator tests: deterministic noise PNGs and a data.jsonl. The expected
// predictions are computed here with generate() directly (batch 1 per sample), independently of the
// evaluator.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "eval/evaluator.h"
#include "io/image.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco::testing {

/// Writes `n` PNGs dir/images/<i>.png (48×40 noise, seed i) and returns their relative paths.
inline std::vector<std::string> write_noise_images(const std::filesystem::path& dir, int n) {
  std::filesystem::create_directories(dir / "images");
  std::vector<std::string> rel;
  for (int i = 0; i < n; ++i) {
    cv::Mat img(40, 48, CV_8UC3);
    cv::RNG rng(1000 + i);
    rng.fill(img, cv::RNG::UNIFORM, cv::Scalar::all(0), cv::Scalar::all(256));
    rel.push_back("images/" + std::to_string(i) + ".png");
    cv::imwrite((dir / rel.back()).string(), img);
  }
  return rel;
}

/// Questions vary in length so batches really need left padding.
inline std::string test_question(int i) {
  static const char* const kQ[] = {"What colour is the cube?", "How many?",
                                   "Is there a red circle left of the square?", "What shape is it?",
                                   "Which is bigger, the blue cube or the small green one?"};
  return kQ[i % 5];
}

/// Writes an `n`-sample dataset into `dir` (noise images, test_question()s, families "even" and "odd") whose
/// answers are arbitrary: for tests that compare two runs, not against truth. @return dir.
inline std::filesystem::path write_arbitrary_dataset(const std::filesystem::path& dir, int n) {
  const auto images = write_noise_images(dir, n);
  std::ofstream out(dir / "data.jsonl");
  for (int i = 0; i < n; ++i)
    out << nlohmann::json{{"id", "s" + std::to_string(i)},
                          {"image", images[i]},
                          {"question", test_question(i)},
                          {"answer", i % 3 == 0 ? "red" : "2"},
                          {"family", i % 2 ? "odd" : "even"}}
               .dump()
        << "\n";
  return dir;
}

/// Greedy predictions of the tiny model for (image, question) pairs, one generate() call per sample.
inline std::vector<std::string> direct_predictions(const std::filesystem::path& dir,
                                                   const std::vector<std::string>& images,
                                                   const std::vector<std::string>& questions) {
  auto m = VisionLanguageModel::load(tiny_model_dir(), RunContext{});
  const GenerationConfig gc = eval::default_eval_generation();
  std::vector<std::string> out;
  for (size_t i = 0; i < images.size(); ++i) {
    VlmRequest req{m.preprocess(io::load_image_rgb((dir / images[i]).string())), m.prompt_ids(questions[i])};
    out.push_back(generate(m, {req}, gc).texts[0]);
  }
  return out;
}

/// The 8-sample dataset with known scores. Families: "colour" = samples 0–4, "count" = 5–7. Samples 0, 2, 4
/// and 6 take the model's own greedy output as answer (exact match 1); the others get a wrong answer.
/// Sample 7 also has 10 human answers, 2 of them the model's output: VQA soft accuracy 0.6, exact match 0.
struct KnownDataset {
  TempDir tmp;
  std::filesystem::path dir = tmp.path() / "ds";
  std::vector<std::string> ids, predictions;
  static constexpr int kN = 8;
  static constexpr const char* kWrong = "zzwrong";

  KnownDataset() {
    const auto images = write_noise_images(dir, kN);
    std::vector<std::string> questions;
    for (int i = 0; i < kN; ++i) questions.push_back(test_question(i));
    predictions = direct_predictions(dir, images, questions);
    std::ofstream out(dir / "data.jsonl");
    for (int i = 0; i < kN; ++i) {
      ids.push_back("q" + std::to_string(i));
      const bool right = i % 2 == 0;
      nlohmann::json j = {{"id", ids.back()},
                          {"image", images[i]},
                          {"question", questions[i]},
                          {"answer", right ? predictions[i] : std::string(kWrong)},
                          {"family", i < 5 ? "colour" : "count"}};
      if (i == 7) {
        std::vector<std::string> answers(10, kWrong);
        answers[3] = answers[8] = predictions[i];
        j["answers"] = answers;
      }
      out << j.dump() << "\n";
    }
  }
};

/// The shared KnownDataset (built once per test binary).
inline const KnownDataset& known_dataset() {
  static const KnownDataset ds;
  return ds;
}

}  // namespace vispco::testing
