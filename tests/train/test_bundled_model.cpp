// The shipped model models/synthvqa-small (issue 4): it loads through the same code path as any Hugging Face
// LLaVA checkpoint, `vispco generate` answers questions about a shipped image correctly, and its accuracy on
// a fixed 200-sample slice of the SynthVQA test split, computed here by the evaluator, stays above a floor.
// The floors sit under the figures measured when the model was shipped (its model card), far above chance.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/context.h"
#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/splits.h"
#include "model/llava/llava.h"
#include "prune/plan.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
const std::string kSource = ::vispco::testing::source_dir();
const std::string kModel = kSource + "/models/synthvqa-small";

// Measured when the model was shipped (recipe 15, 2026-12-04, fp32 on an AVX2 CPU): 0.865 on test samples
// 0–199 (0.868 on all 2000, model card), 0.235 there with shuffled images, 0.350 there with random pruning to
// K = 32 (this test and `vispco eval`, fp32). Chance: ≥ 4 of 5 at 1/6 per question has probability 0.003; the
// slice's answer-prior accuracy is about 0.24 (12.5 % colour, 17 % shape, 50 % exist and size, 25 % spatial,
// ~17 % counts, ~1 % text).
constexpr int kMinShapeAnswers = 4;       // of 5
constexpr double kMinShuffleDrop = 0.50;  // measured 0.865 − 0.235 = 0.630 on samples 0–199
// The shuffle check runs on the first 100 samples (issue 45: the test's budget), paired with the same
// questions on their own images. The floor stays 0.50: measured on samples 0–99, 0.880 − 0.280 = 0.600 (10
// answers would have to flip to reach the floor); per sample the paired difference (right on its own image −
// right on another's) has a standard deviation of about 0.55 (for 0.88 and 0.28, independent), so the drop's
// standard error on 100 samples is 0.055, and a model that ignores the image (drop ≈ 0, what the check is
// for) lands 9 standard errors under the floor.
constexpr size_t kShuffleSamples = 100;
constexpr double kMinRandom32Drop = 0.35;  // measured 0.865 − 0.350 = 0.515 (issue 16: ≥ 0.20 on all 2000)
constexpr double kMinSliceAccuracy = 0.78;  // overall exact-match accuracy on test samples 0–199

TEST(BundledModel, LoadsAsALlavaCheckpointWithLlavaTokenCounts) {
  RunContext ctx;
  ctx.n_threads = 1;
  apply_threads(ctx);
  auto m = VisionLanguageModel::load(kModel, ctx);
  EXPECT_EQ(m.config().n_visual_tokens(), 576);  // 336 px, patch 14, as LLaVA-1.5
  EXPECT_GE(m.config().text.num_hidden_layers, 8);
  EXPECT_LE(fs::file_size(kModel + "/model.safetensors"), 25u * 1000 * 1000);
}

// data/samples/000000 (calibration split): five objects of distinct colours. Each "What shape is the <colour>
// object?" is answered through the command line; the truth comes from the sample's scene record.
TEST(BundledModel, GenerateAnswersShapeQuestionsAboutAShippedImage) {
  std::ifstream in(kSource + "/data/samples/data.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto sample = nlohmann::json::parse(line);
  ASSERT_EQ(sample.at("id"), "000000");
  int asked = 0, correct = 0;
  std::string log;
  for (const auto& obj : sample.at("scene").at("objects")) {
    const std::string colour = obj.at("color"), shape = obj.at("shape");
    const auto r = testing::run_cli("generate --model " + kModel + " --image " + kSource +
                                    "/data/samples/images/000000.png --prompt 'What shape is the " + colour +
                                    " object?' --threads 1 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string answer = nlohmann::json::parse(r.out).at("answer");
    ++asked;
    correct += answer == shape;
    log += colour + ": " + answer + " (truth " + shape + ")\n";
  }
  EXPECT_EQ(asked, 5);
  EXPECT_GE(correct, kMinShapeAnswers) << log;
}

// The shipped K predictor (issue 18, docs/dynamic-k.md: DivPrune, trained on 2000 labelled scenes; retrained
// for recipe 15): counting needs more tokens than naming a colour — measured 576 vs 16 for these two shipped
// questions — so through the command line `divprune:keep=auto` must give the count question strictly more
// visual tokens.
TEST(BundledModel, ShippedKPredictorGivesCountingMoreTokensThanColour) {
  auto kept = [&](const std::string& image, const std::string& question) {
    const auto r =
        testing::run_cli("generate --model " + kModel + " --image " + kSource + "/data/samples/images/" +
                         image + " --prompt '" + question + "' --plan divprune:keep=auto --threads 1 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("stats").at("n_visual_kept").get<int64_t>();
  };
  const int64_t count = kept("000002.png", "How many squares are there?");
  const int64_t colour = kept("000000.png", "What color is the cross?");
  EXPECT_GT(count, colour);
  EXPECT_LE(colour, 64);
}

// Budget: 500 evaluations on one thread, about 50 s of one core (49.8 s user + 0.3 s system, 50 s wall, on
// the 2-core development machine, 2026-12-05), so a machine ten times as busy still fits ctest's 600 s. It
// took 108 s of CPU (52 s of it in the kernel re-faulting freed activation buffers) and hit the timeout on a
// busy machine until the test binary got the CLI's allocator settings (core/allocator.h, tests/test_main.cpp)
// and the shuffle check went to 100 samples (kShuffleSamples). The accuracy floor keeps its 200 samples: it
// needs them (binomial standard error 0.024 at 0.865, the floor 3.5 of them below).
TEST(BundledModel, AccuracyOnTheFirst200TestSamplesIsAboveTheFloorAndDependsOnTheVisualTokens) {
  const auto& split = eval::synthvqa::find_split("test");
  testing::TempDir tmp;
  eval::synthvqa::SynthOptions so;
  so.seed = split.seed;
  so.count = 200;  // sample i depends only on (seed, i): these are the test split's first 200 samples
  so.n_threads = 1;
  eval::synthvqa::generate_synthvqa(so, tmp.str("slice"));
  const auto ds = eval::load_dataset(tmp.str("slice"));
  RunContext ctx;
  ctx.n_threads = 1;
  apply_threads(ctx);
  auto m = VisionLanguageModel::load(kModel, ctx);
  eval::EvalOptions o;
  o.batch_size = 8;
  const auto rep = eval::evaluate(m, eval::model_folder_hash(kModel), ds, o);
  ASSERT_EQ(rep.rows.size(), 200u);
  const double acc = rep.metrics.overall.accuracy();
  std::printf("bundled model, test samples 0-199: accuracy %.4f\n", acc);
  EXPECT_GE(acc, kMinSliceAccuracy);
  // The answers depend on the image: the first kShuffleSamples questions on each other's images (a seeded
  // derangement) score at least kMinShuffleDrop lower than the same questions on their own images.
  double acc_first = 0;
  for (size_t i = 0; i < kShuffleSamples; ++i) acc_first += rep.rows[i].result.score;
  acc_first /= kShuffleSamples;
  o.shuffle_images = 1;
  o.limit = kShuffleSamples;
  const auto shuffled = eval::evaluate(m, eval::model_folder_hash(kModel), ds, o);
  ASSERT_EQ(shuffled.rows.size(), kShuffleSamples);
  const double acc_shuffled = shuffled.metrics.overall.accuracy();
  std::printf("bundled model, test samples 0-%zu: accuracy %.4f, on shuffled images %.4f\n",
              kShuffleSamples - 1, acc_first, acc_shuffled);
  EXPECT_LE(acc_shuffled, acc_first - kMinShuffleDrop);
  o.limit = 0;
  // Pruning is visible: keeping 32 of the 576 visual tokens at random before the decoder costs at least
  // kMinRandom32Drop (a testbed on which pruning cannot hurt says nothing about scorers).
  o.shuffle_images.reset();
  const auto random32 =
      eval::evaluate_plan(m, eval::model_folder_hash(kModel), ds, o,
                          parse_plan("random:layer=0,keep=32", m.shape()), ScorerEnv{kModel});
  const double acc_random32 = random32.metrics.overall.accuracy();
  std::printf("bundled model, test samples 0-199 at random:layer=0,keep=32: accuracy %.4f\n", acc_random32);
  EXPECT_LE(acc_random32, acc - kMinRandom32Drop);
}

}  // namespace
}  // namespace vispco
