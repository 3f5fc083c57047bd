// Tests of the jsonl dataset loader: SynthVQA folders load, bad lines name file and line, paths leaving
// the folder are refused unless allowed, missing images stop or are skipped per policy.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/synthvqa/generator.h"
#include "eval/temp_dir.h"

namespace vispco::eval {
namespace {

// Expects load_dataset to throw E whose message contains every fragment.
template <typename E>
void expect_error(const std::string& path, const DatasetOptions& opts,
                  const std::vector<std::string>& fragments) {
  try {
    load_dataset(path, opts);
    ADD_FAILURE() << "expected an error from " << path;
  } catch (const E& e) {
    for (const std::string& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

// A folder with one valid image file "a.png" (bytes need not decode unless asked).
struct Folder {
  test::TempDir tmp;
  Folder() { test::write_text(tmp / "ds/a.png", "not really a png"); }
  std::string jsonl(const std::string& body) {
    test::write_text(tmp / "ds/data.jsonl", body);
    return tmp / "ds/data.jsonl";
  }
};

TEST(Dataset, LoadsSynthVqaFolder) {
  test::TempDir tmp;
  synthvqa::SynthOptions opts;
  opts.seed = 11;
  opts.count = 8;
  synthvqa::generate_synthvqa(opts, tmp / "syn");
  DatasetOptions dopts;
  dopts.decode_images = true;
  const Dataset ds = load_dataset(tmp / "syn", dopts);
  ASSERT_EQ(ds.samples.size(), 8u);
  EXPECT_EQ(ds.n_skipped, 0u);
  EXPECT_EQ(ds.samples[0].id, "000000");
  EXPECT_EQ(ds.samples[0].family, "color");
  EXPECT_EQ(ds.samples[0].image_path, tmp / "syn/images/000000.png");
  EXPECT_EQ(ds.samples[3].line, 4u);
  EXPECT_TRUE(ds.samples[0].extra.contains("scene"));
  EXPECT_TRUE(ds.samples[0].answers.empty());
  EXPECT_EQ(ds.family_counts().size(), 8u);
  // The hash is stable and covers the image bytes.
  EXPECT_EQ(load_dataset(tmp / "syn/data.jsonl").hash, ds.hash);
  test::write_text(tmp / "syn/images/000007.png", "changed");
  EXPECT_NE(load_dataset(tmp / "syn").hash, ds.hash);
  DatasetOptions no_images;
  no_images.hash_images = false;
  EXPECT_NE(load_dataset(tmp / "syn", no_images).hash, ds.hash);
}

TEST(Dataset, BadLinesNameFileAndLine) {
  Folder f;
  const std::string good = R"({"id": 1, "image": "a.png", "question": "q?", "answer": "x"})";
  const DatasetOptions opts;
  const auto at3 = [&](const std::string& bad, const std::string& what) {
    expect_error<FormatError>(f.jsonl(good + "\n\n" + bad + "\n"), opts, {"data.jsonl:3:", what});
  };
  at3(R"({"image": "a.png", "question": "q?", "answer": )", "not valid JSON");
  at3(R"(["a.png", "q?"])", "expected a JSON object");
  at3(R"({"question": "q?", "answer": "x", "id": 2})", "missing field \"image\"");
  at3(R"({"image": "a.png", "answer": "x", "id": 2})", "missing field \"question\"");
  at3(R"({"image": "a.png", "question": "", "answer": "x", "id": 2})", "\"question\" is empty");
  at3(R"({"image": 5, "question": "q?", "answer": "x", "id": 2})", "\"image\" must be a string");
  at3(R"({"image": "a.png", "question": "q?", "id": 2})", "needs \"answer\" or \"answers\"");
  at3(R"({"image": "a.png", "question": "q?", "answers": [], "id": 2})", "non-empty list");
  at3(R"({"image": "a.png", "question": "q?", "answers": [{"x": 1}], "id": 2})", "answers[0]");
  at3(R"({"image": "a.png", "question": "q?", "answer": "x", "id": 1})",
      "duplicate id '1' (first on line 1)");
  at3(R"({"image": "a.png", "question": "q?", "answer": "x", "id": [1]})", "\"id\"");
  at3(R"({"image": "a.png", "question": "q?", "answer": "x", "family": 3})", "\"family\"");
  expect_error<IoError>(f.tmp / "nowhere.jsonl", opts, {"nowhere.jsonl"});
}

TEST(Dataset, ReadsVqaStyleAnswersAndDefaults) {
  Folder f;
  const Dataset ds = load_dataset(f.jsonl(
      R"({"image": "a.png", "question": "How many?", "answers": [{"answer": "2"}, {"answer": "two"}, {"answer": "3"}, {"answer": "3"}], "extra_field": true})"
      "\n"
      R"({"image": "./a.png", "question": "Count?", "answer": 4, "family": "count"})"
      "\n"));
  ASSERT_EQ(ds.samples.size(), 2u);
  EXPECT_EQ(ds.samples[0].id, "1");
  EXPECT_EQ(ds.samples[0].answer, "3");  // most frequent
  EXPECT_EQ(ds.samples[0].answers, (std::vector<std::string>{"2", "two", "3", "3"}));
  EXPECT_EQ(ds.samples[0].family, "default");
  EXPECT_EQ(ds.samples[0].extra["extra_field"], true);
  EXPECT_EQ(ds.samples[1].answer, "4");
  EXPECT_EQ(ds.samples[1].family, "count");
  EXPECT_EQ(ds.samples[1].image_path, ds.samples[0].image_path);
}

TEST(Dataset, RefusesPathsLeavingTheFolderUnlessAllowed) {
  Folder f;
  test::write_text(f.tmp / "outside.png", "x");
  const std::string up = f.jsonl(R"({"image": "sub/../../outside.png", "question": "q?", "answer": "x"})"
                                 "\n");
  expect_error<FormatError>(up, {}, {"data.jsonl:1:", "leaves the dataset folder", "allow"});
  DatasetOptions allow;
  allow.allow_outside = true;
  EXPECT_EQ(load_dataset(up, allow).samples.at(0).image_path, f.tmp / "outside.png");

  const std::string abs = f.jsonl(R"({"image": ")" + (f.tmp / "outside.png") +
                                  R"(", "question": "q?", "answer": "x"})"
                                  "\n");
  expect_error<FormatError>(abs, {}, {"data.jsonl:1:", "leaves the dataset folder"});
  EXPECT_EQ(load_dataset(abs, allow).samples.size(), 1u);
}

TEST(Dataset, MissingImagesStopOrAreSkipped) {
  Folder f;
  const std::string path = f.jsonl(R"({"image": "a.png", "question": "q?", "answer": "x"})"
                                   "\n"
                                   R"({"image": "gone.png", "question": "q?", "answer": "x"})"
                                   "\n"
                                   R"({"image": "a.png", "question": "q2?", "answer": "y"})"
                                   "\n");
  expect_error<IoError>(path, {}, {"data.jsonl:2:", "gone.png", "missing"});
  DatasetOptions skip;
  skip.on_missing_image = MissingImagePolicy::kSkip;
  const Dataset ds = load_dataset(path, skip);
  EXPECT_EQ(ds.samples.size(), 2u);
  EXPECT_EQ(ds.n_skipped, 1u);
  ASSERT_EQ(ds.warnings.size(), 1u);
  EXPECT_NE(ds.warnings[0].find(":2:"), std::string::npos);
  // With decoding, bytes that are not an image count as unreadable.
  skip.decode_images = true;
  const Dataset decoded = load_dataset(path, skip);
  EXPECT_EQ(decoded.samples.size(), 0u);
  EXPECT_EQ(decoded.n_skipped, 3u);
}

}  // namespace
}  // namespace vispco::eval
