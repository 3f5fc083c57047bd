// Tests of the SynthVQA generator: determinism, every answer re-derived from the stored scene by logic
// written here (independently of the generator), scene/pixel consistency, family and answer balance, splits.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/scene.h"
#include "eval/synthvqa/splits.h"
#include "eval/synthvqa_checks.h"
#include "eval/temp_dir.h"
#include "test_paths.h"

namespace vispco::eval::synthvqa {
namespace {

using nlohmann::json;
constexpr uint64_t kSeed = 123;
constexpr size_t kN = 400;

// The samples shared by the tests below (rendered once).
const std::vector<SynthSample>& samples() {
  static const std::vector<SynthSample> s = make_samples(make_sample, kSeed, kN);
  return s;
}

// ---- Independent re-derivation: reads the written JSON record only. ----

std::vector<json> objects_where(const json& scene, const std::string& colour, const std::string& shape) {
  std::vector<json> out;
  for (const json& o : scene["objects"])
    if ((colour.empty() || o["color"] == colour) && (shape.empty() || o["shape"] == shape)) out.push_back(o);
  return out;
}

// The single object matching, or a failure message.
json unique_object(const json& scene, const std::string& colour, const std::string& shape) {
  const auto found = objects_where(scene, colour, shape);
  EXPECT_EQ(found.size(), 1u) << "object '" << colour << " " << shape << "' is not unique in "
                              << scene.dump();
  return found.empty() ? json() : found[0];
}

// Every relation that holds between A and B: a clear offset ≥ 40 px on one axis, at most half as much on the
// other.
std::vector<std::string> relations(const json& a, const json& b) {
  const double ax = a["x"], ay = a["y"], bx = b["x"], by = b["y"];
  std::vector<std::string> out;
  if (bx - ax >= 40 && std::abs(ay - by) <= (bx - ax) / 2) out.push_back("left");
  if (ax - bx >= 40 && std::abs(ay - by) <= (ax - bx) / 2) out.push_back("right");
  if (by - ay >= 40 && std::abs(ax - bx) <= (by - ay) / 2) out.push_back("above");
  if (ay - by >= 40 && std::abs(ax - bx) <= (ay - by) / 2) out.push_back("below");
  return out;
}

std::string derive_answer(const json& rec) {
  const std::string q = rec["question"], family = rec["family"];
  const json& scene = rec["scene"];
  std::smatch m;
  if (family == "color" && std::regex_match(q, m, std::regex(R"(What color is the (\w+)\?)")))
    return unique_object(scene, "", m[1])["color"];
  if (family == "shape" && std::regex_match(q, m, std::regex(R"(What shape is the (\w+) object\?)")))
    return unique_object(scene, m[1], "")["shape"];
  if (family == "count_shape" && std::regex_match(q, m, std::regex(R"(How many (\w+) are there\?)")))
    return std::to_string(objects_where(scene, "", singular(m[1])).size());
  if (family == "count_color" && std::regex_match(q, m, std::regex(R"(How many (\w+) objects are there\?)")))
    return std::to_string(objects_where(scene, m[1], "").size());
  if (family == "exist" && std::regex_match(q, m, std::regex(R"(Is there a (\w+) (\w+) in the image\?)")))
    return objects_where(scene, m[1], m[2]).empty() ? "no" : "yes";
  if (family == "spatial" &&
      std::regex_match(
          q, m,
          std::regex(
              R"(Where is the (\w+) (\w+) relative to the (\w+) (\w+): left, right, above, or below\?)"))) {
    const auto rel = relations(unique_object(scene, m[1], m[2]), unique_object(scene, m[3], m[4]));
    EXPECT_EQ(rel.size(), 1u) << q;
    return rel.empty() ? "" : rel[0];
  }
  if (family == "size" &&
      std::regex_match(q, m, std::regex(R"(Is the (\w+) (\w+) bigger or smaller than the (\w+) (\w+)\?)"))) {
    const int ra = unique_object(scene, m[1], m[2])["radius"],
              rb = unique_object(scene, m[3], m[4])["radius"];
    EXPECT_NE(ra, rb);
    return ra > rb ? "bigger" : "smaller";
  }
  if (family == "text" && std::regex_match(q, m, std::regex(R"(What does the (?:(\w+) )?text say\?)")))
    return text_answer(scene, m[1], q);
  ADD_FAILURE() << "question does not match its family's template: " << family << ": " << q;
  return "";
}

TEST(SynthVQA, EveryAnswerMatchesIndependentDerivation) { expect_answers_derived(samples(), derive_answer); }

TEST(SynthVQA, ScenesRespectTheirBoundsAndPixelsShowTheObjects) {
  for (const SynthSample& s : samples()) {
    const json scene = s.record()["scene"];
    const auto& objs = scene["objects"];
    ASSERT_GE(objs.size(), 2u);
    ASSERT_LE(objs.size(), 10u);
    for (size_t i = 0; i < objs.size(); ++i) {
      const int x = objs[i]["x"], y = objs[i]["y"], r = objs[i]["radius"];
      EXPECT_TRUE(objs[i]["size"] == "small" ? (r >= 14 && r <= 18) : (r >= 25 && r <= 32)) << s.id;
      EXPECT_TRUE(x - r >= 0 && y - r >= 0 && x + r < 336 && y + r < 336) << s.id;
      for (size_t j = 0; j < i; ++j) {
        const double d = std::hypot(x - objs[j]["x"].get<double>(), y - objs[j]["y"].get<double>());
        EXPECT_GE(d, 0.9 * (r + objs[j]["radius"].get<int>()) - 1e-9) << "overlap in " << s.id;
      }
      // The centre pixel shows the recorded fill colour exactly (nothing else is drawn there).
      const cv::Vec3b px = s.rgb.at<cv::Vec3b>(y, x);
      EXPECT_EQ(json({px[0], px[1], px[2]}), objs[i]["rgb"]) << s.id << " object " << i;
    }
    for (const json& t : scene["texts"]) {
      expect_text_within(t, objs, s.id, 2, 4, 12, 20);
      const int tx = t["x"], ty = t["y"], tw = t["w"], th = t["h"];
      EXPECT_TRUE(tx >= 0 && ty >= 0 && tx + tw < 336 && ty + th < 336) << s.id;
    }
    // Cluttered, never flat: many distinct colours away from the objects.
    std::set<int> colours;
    for (int y = 0; y < 336; y += 7)
      for (int x = 0; x < 336; x += 7) {
        const cv::Vec3b p = s.rgb.at<cv::Vec3b>(y, x);
        colours.insert(p[0] << 16 | p[1] << 8 | p[2]);
      }
    EXPECT_GT(colours.size(), 200u) << "background of " << s.id << " looks flat";
  }
}

TEST(SynthVQA, FamiliesAndAnswersAreBalanced) {
  std::map<std::string, std::map<std::string, size_t>> answers;  // family → answer → count
  std::map<size_t, size_t> text_lengths;
  size_t n_adversarial = 0;
  for (const SynthSample& s : samples()) {
    ++answers[s.family][s.answer];
    if (s.family == "text") ++text_lengths[s.answer.size()];
    if (s.family == "exist" && s.answer == "no") {
      std::smatch m;
      std::regex_match(s.question, m, std::regex(R"(Is there a (\w+) (\w+) in the image\?)"));
      const json scene = s.record()["scene"];
      if (!objects_where(scene, m[1], "").empty() && !objects_where(scene, "", m[2]).empty()) ++n_adversarial;
    }
  }
  // Stated bounds: 8 families × 50 samples exactly; within a family every answer of its fixed answer set
  // occurs, and counts differ by at most 1 (the generator cycles through answers).
  const std::map<std::string, size_t> n_answers{{"color", 8},       {"shape", 6}, {"count_shape", 6},
                                                {"count_color", 6}, {"exist", 2}, {"spatial", 4},
                                                {"size", 2}};
  ASSERT_EQ(answers.size(), 8u);
  for (const auto& [family, counts] : answers) {
    size_t total = 0, lo = kN, hi = 0;
    for (const auto& [a, n] : counts) total += n, lo = std::min(lo, n), hi = std::max(hi, n);
    EXPECT_EQ(total, kN / 8) << family;
    if (family == "text") continue;
    EXPECT_EQ(counts.size(), n_answers.at(family)) << family;
    EXPECT_LE(hi - lo, 1u) << family;
  }
  EXPECT_EQ(answers["exist"]["yes"], answers["exist"]["no"]);
  EXPECT_GE(n_adversarial, answers["exist"]["no"] / 2)
      << "POPE-style negatives (colour and shape both present)";
  EXPECT_EQ(text_lengths.size(), 3u);
  for (const auto& [len, n] : text_lengths) EXPECT_NEAR(static_cast<double>(n), kN / 8 / 3.0, 1.0) << len;
}

TEST(SynthVQA, SameSeedGivesIdenticalBytesDifferentSeedDiffers) {
  const SynthSample a = make_sample(kSeed, 5), b = make_sample(kSeed, 5), c = make_sample(kSeed + 1, 5);
  EXPECT_EQ(a.record(), b.record());
  EXPECT_EQ(cv::norm(a.rgb, b.rgb, cv::NORM_INF), 0.0);
  EXPECT_NE(a.record()["scene"], c.record()["scene"]);
  // The hash does not depend on the worker count; a different seed changes it.
  const std::string h1 = synthvqa_content_hash(7, 24, 1);
  EXPECT_EQ(h1, synthvqa_content_hash(7, 24, 2));
  EXPECT_NE(h1, synthvqa_content_hash(8, 24, 2));
  EXPECT_EQ(h1.rfind("sha256:", 0), 0u);
  EXPECT_EQ(h1.size(), 7u + 64u);
}

TEST(SynthVQA, TextRichTrainingScenesKeepTheQuestionAndAddStringsOfUnusedInks) {
  for (uint64_t i = 0; i < 16; ++i) {
    const SynthSample plain = make_sample(kSeed, i), same = make_sample(kSeed, i, SampleOptions{});
    EXPECT_EQ(plain.record(), same.record()) << i;  // default options: the identical sample
    const SynthSample rich = make_sample(kSeed, i, {.min_texts = 4});
    EXPECT_EQ(rich.question, plain.question) << i;
    EXPECT_EQ(rich.answer, plain.answer) << i;
    EXPECT_GE(rich.scene.texts.size(), 4u) << i;
    std::set<std::string> inks;
    for (const auto& t : rich.scene.texts) inks.insert(t.color);
    EXPECT_EQ(inks.size(), rich.scene.texts.size()) << i;  // "the <ink> text" stays unambiguous
    // The strings the family drew come first, unchanged.
    for (size_t k = 0; k < plain.scene.texts.size() && plain.family == "text"; ++k)
      EXPECT_EQ(rich.scene.texts[k].text, plain.scene.texts[k].text) << i;
  }
}

TEST(SynthVQA, GeneratedFoldersAreByteIdenticalAndPrefixStable) {
  test::TempDir tmp;
  SynthOptions opts;
  opts.seed = 99;
  opts.count = 6;
  const SynthResult r1 = generate_synthvqa(opts, tmp / "a");
  opts.n_threads = 1;
  const SynthResult r2 = generate_synthvqa(opts, tmp / "b");
  opts.count = 9;
  generate_synthvqa(opts, tmp / "c");
  EXPECT_EQ(r1.content_hash, r2.content_hash);
  EXPECT_EQ(r1.content_hash, synthvqa_content_hash(99, 6));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp / "a")) {
    if (!entry.is_regular_file()) continue;
    const auto rel = std::filesystem::relative(entry.path(), tmp / "a").string();
    EXPECT_EQ(read_file(entry.path().string()), read_file(tmp / ("b/" + rel))) << rel;
  }
  const std::string jsonl6 = read_file(tmp / "a/data.jsonl"), jsonl9 = read_file(tmp / "c/data.jsonl");
  EXPECT_EQ(jsonl9.substr(0, jsonl6.size()), jsonl6) << "the first samples must not depend on the count";
  const json manifest = json::parse(read_file(tmp / "a/manifest.json"));
  EXPECT_EQ(manifest["seed"], 99);
  EXPECT_EQ(manifest["count"], 6);
  EXPECT_EQ(manifest["generator_version"], kGeneratorVersion);
  EXPECT_EQ(manifest["content_hash"], r1.content_hash);
  EXPECT_TRUE(std::filesystem::exists(tmp / "a/images/000005.png"));
}

TEST(SynthVQA, SceneJsonRoundTrips) {
  for (size_t i = 0; i < 16; ++i) {
    const Scene& s = samples()[i].scene;
    EXPECT_EQ(scene_to_json(scene_from_json(scene_to_json(s))), scene_to_json(s));
  }
  json bad = scene_to_json(samples()[0].scene);
  bad["objects"][0]["shape"] = "hexagon";
  try {
    scene_from_json(bad);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("circle"), std::string::npos) << "lists valid names: " << e.what();
  }
}

TEST(SynthVQA, CalibSplitReproducesItsRecordedHash) {
  const SplitInfo& calib = find_split("calib");
  EXPECT_EQ(calib.count, 500u);
  EXPECT_EQ(find_split("test").count, 2000u);
  EXPECT_EQ(synthvqa_content_hash(calib.seed, calib.count), calib.content_hash);
  EXPECT_THROW(find_split("train"), InvalidArgument);
  try {
    check_split_hash(calib, "sha256:0000", "/some/dir");
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::string("expected ") + calib.content_hash), std::string::npos) << what;
    EXPECT_NE(what.find("got sha256:0000"), std::string::npos) << what;
  }
}

TEST(SynthVQA, CommittedSamplesMatchTheGenerator) {
  const std::string dir = std::string(::vispco::testing::source_dir()) + "/data/samples";
  std::ifstream in(dir + "/data.jsonl");
  std::string line;
  size_t n = 0;
  for (; std::getline(in, line); ++n) {
    const json rec = json::parse(line);
    const SynthSample s = make_sample(find_split("calib").seed, std::stoull(rec["id"].get<std::string>()));
    EXPECT_EQ(s.record(), rec);
    cv::Mat bgr = cv::imread(dir + "/" + rec["image"].get<std::string>(), cv::IMREAD_COLOR), rgb;
    ASSERT_FALSE(bgr.empty());
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    EXPECT_EQ(cv::norm(rgb, s.rgb, cv::NORM_INF), 0.0) << rec["image"];
  }
  EXPECT_EQ(n, 4u);
}

TEST(SynthVQA, CliSynthWritesDatasetAndRejectsBadArguments) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(run_cli("data synth --seed 4 --count 3 --out " + (tmp / "d"), &out, tmp), 0) << out;
  EXPECT_NE(out.find(synthvqa_content_hash(4, 3)), std::string::npos) << out;
  EXPECT_EQ(json::parse(read_file(tmp / "d/manifest.json"))["count"], 3);
  EXPECT_EQ(run_cli("data synth --seed 4 --out " + (tmp / "e"), &out, tmp), 2) << out;
  EXPECT_NE(out.find("error: data synth: give --split"), std::string::npos) << out;
  EXPECT_EQ(run_cli("data synth --split calib --seed 3 --out " + (tmp / "e"), &out, tmp), 2) << out;
  EXPECT_NE(run_cli("data synth --split train --out " + (tmp / "e"), &out, tmp), 0) << out;
  ASSERT_EQ(run_cli("data check --data " + (tmp / "d"), &out, tmp), 0) << out;
  EXPECT_NE(out.find("3 samples"), std::string::npos) << out;
}

}  // namespace
}  // namespace vispco::eval::synthvqa
