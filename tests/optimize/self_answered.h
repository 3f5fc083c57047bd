// A 12-sample VQA dataset whose answers are the tiny model's own unpruned greedy outputs (unpruned accuracy
// 1, every dynamic-K label defined): noise images, varied questions, families "x" (every third) and "y".
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/eval_fixture.h"

namespace vispco::testing {

struct SelfAnsweredDataset {
  TempDir tmp;
  std::filesystem::path dir = tmp.path() / "ds";
  std::vector<std::string> images, questions;
  SelfAnsweredDataset() {
    const int n = 12;
    images = write_noise_images(dir, n);
    for (int i = 0; i < n; ++i) questions.push_back(test_question(i));
    const auto preds = direct_predictions(dir, images, questions);
    std::ofstream out(dir / "data.jsonl");
    for (int i = 0; i < n; ++i)
      out << nlohmann::json{{"id", "t" + std::to_string(i)},
                            {"image", images[i]},
                            {"question", questions[i]},
                            {"answer", preds[i]},
                            {"family", i % 3 == 0 ? "x" : "y"}}
                 .dump()
          << "\n";
  }
};

/// The shared instance (built once per test binary).
inline const SelfAnsweredDataset& self_answered() {
  static const SelfAnsweredDataset ds;
  return ds;
}

}  // namespace vispco::testing
