// Tests of the image-dependence check (EvalOptions::shuffle_images) and the answer prior of a report: the
// permutation is a seeded derangement, each shuffled sample's prediction equals generate() on its own
// question with the other sample's image, results are stored apart, and priors are counted by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "eval/eval_fixture.h"
#include "eval/evaluator.h"
#include "eval/run_key.h"

namespace vispco::eval {
namespace {

using testing::known_dataset;
using testing::TempDir;

TEST(EvalShuffleImages, PermutationIsASeededDerangement) {
  for (size_t n : {2u, 3u, 10u, 1000u}) {
    const auto p = image_permutation(n, 7);
    std::vector<size_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(sorted[i], i) << "a permutation of [0, " << n << ")";
      EXPECT_NE(p[i], i) << "index " << i << " keeps its own image (n = " << n << ")";
    }
    EXPECT_EQ(image_permutation(n, 7), p) << "same seed, same order";
  }
  EXPECT_EQ(image_permutation(2, 3), (std::vector<size_t>{1, 0}));  // the only derangement of two
  EXPECT_NE(image_permutation(1000, 7), image_permutation(1000, 8));
  EXPECT_EQ(image_permutation(1, 7), (std::vector<size_t>{0}));
  EXPECT_TRUE(image_permutation(0, 7).empty());
}

TEST(EvalShuffleImages, EachQuestionIsAnsweredOnAnotherSamplesImageAndStoredApart) {
  const auto& kd = known_dataset();
  const Dataset ds = load_dataset(kd.dir.string());
  auto model = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const std::string hash = model_folder_hash(testing::tiny_model_dir());
  TempDir tmp;
  EvalOptions o;
  o.store_path = tmp.str("r.sqlite");
  const EvalReport plain = evaluate(model, hash, ds, o);
  o.shuffle_images = 5;
  o.batch_size = 3;
  const EvalReport shuffled = evaluate(model, hash, ds, o);
  EXPECT_EQ(shuffled.n_from_store, 0u) << "shuffled results must not reuse the real images' results";
  EXPECT_EQ(shuffled.n_evaluated, 8u);
  EXPECT_EQ(shuffled.key.dataset_hash, ds.hash + "+shuffle-images=5");

  // Independently: generate() on image π(i) with question i, one sample at a time.
  const auto pi = image_permutation(8, 5);
  std::vector<std::string> images, questions;
  for (size_t i = 0; i < 8; ++i) {
    images.push_back(ds.samples[pi[i]].image);
    questions.push_back(ds.samples[i].question);
  }
  const auto expected = testing::direct_predictions(kd.dir, images, questions);
  ASSERT_EQ(shuffled.rows.size(), 8u);
  size_t changed = 0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(shuffled.rows[i].id, kd.ids[i]);
    EXPECT_EQ(shuffled.rows[i].image_of, kd.ids[pi[i]]);
    EXPECT_EQ(shuffled.rows[i].result.prediction, expected[i]) << "sample " << i;
    changed += shuffled.rows[i].result.prediction != plain.rows[i].result.prediction;
  }
  EXPECT_GT(changed, 0u) << "the tiny model's answers depend on its image";
  // A rerun reads the shuffled results back.
  EXPECT_EQ(evaluate(model, hash, ds, o).n_from_store, 8u);
}

TEST(EvalShuffleImages, AnswerPriorIsEachFamilysMostFrequentAnswer) {
  TempDir tmp;
  const auto dir = tmp.path() / "ds";
  const auto images = testing::write_noise_images(dir, 6);
  // colour: red, Red., blue → 2 of 3; count: 2, two, 3 → "two" normalises to "2": 2 of 3; all: 4 of 6.
  const char* answers[] = {"red", "Red.", "blue", "2", "two", "3"};
  {
    std::ofstream out(dir / "data.jsonl");
    for (int i = 0; i < 6; ++i)
      out << nlohmann::json{{"id", "s" + std::to_string(i)},
                            {"image", images[static_cast<size_t>(i)]},
                            {"question", "What is it?"},
                            {"answer", answers[i]},
                            {"family", i < 3 ? "colour" : "count"}}
                 .dump()
          << "\n";
  }
  auto model = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  const EvalReport r = evaluate(model, "m", load_dataset(dir.string()), EvalOptions{});
  EXPECT_NEAR(r.answer_prior.at("colour"), 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.answer_prior.at("count"), 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.answer_prior.at("all"), 4.0 / 6, 1e-12);
  EXPECT_NE(r.to_markdown().find("colour 66.7"), std::string::npos) << r.to_markdown();
}

}  // namespace
}  // namespace vispco::eval
