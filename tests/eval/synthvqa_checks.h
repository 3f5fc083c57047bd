// What the SynthVQA and SynthVQA-HR tests share: their samples, re-deriving answers from the written record
// (plural shape names, the text family), the loop that compares every sample's answer with its derivation,
// the checks of a text record, and running the CLI with its output captured. Used by test_synthvqa.cpp and
// test_synthvqa_hr.cpp.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "eval/synthvqa/generator.h"
#include "eval/temp_dir.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco::eval::synthvqa {

using ::vispco::testing::read_file;

/// Samples 0 … n − 1 of `seed` made by `make` (make_sample, make_hr_sample): a test file's shared samples.
inline std::vector<SynthSample> make_samples(SynthSample (*make)(uint64_t, uint64_t), uint64_t seed,
                                             size_t n) {
  std::vector<SynthSample> v;
  for (size_t i = 0; i < n; ++i) v.push_back(make(seed, i));
  return v;
}

/// The shape of a plural in questions ("circles" → "circle").
inline std::string singular(const std::string& plural) {
  static const std::map<std::string, std::string> m{{"circles", "circle"},     {"squares", "square"},
                                                    {"triangles", "triangle"}, {"diamonds", "diamond"},
                                                    {"stars", "star"},         {"crosses", "cross"}};
  return m.at(plural);
}

/// The answer to "What does the [<ink> ]text say?" (`ink` the regex's optional group): the one string of
/// `scene` (of that ink when named), or "" with a failure when it is not unique.
inline std::string text_answer(const nlohmann::json& scene, const std::ssub_match& ink,
                               const std::string& q) {
  std::vector<std::string> found;
  for (const nlohmann::json& t : scene["texts"])
    if (!ink.matched || t["color"] == ink.str()) found.push_back(t["text"]);
  EXPECT_EQ(found.size(), 1u) << "text not unique: " << q;
  return found.empty() ? "" : found[0];
}

/// Checks that `derive` (written in the test, from the record alone) gives every sample's answer.
inline void expect_answers_derived(const std::vector<SynthSample>& samples,
                                   const std::function<std::string(const nlohmann::json&)>& derive) {
  for (const SynthSample& s : samples) {
    const nlohmann::json rec = nlohmann::json::parse(s.record().dump());  // exactly what data.jsonl holds
    EXPECT_EQ(derive(rec), rec["answer"].get<std::string>()) << "sample " << s.id << ": " << rec.dump();
  }
}

/// Checks text record `t` of sample `id` against its kind's limits: its length in [min_len, max_len]
/// characters, its font in [min_px, max_px] pixels, and its box clear of every object disc of `objects`
/// (the records' "objects").
inline void expect_text_within(const nlohmann::json& t, const nlohmann::json& objects, const std::string& id,
                               size_t min_len, size_t max_len, int min_px, int max_px) {
  const std::string text = t["text"];
  EXPECT_TRUE(text.size() >= min_len && text.size() <= max_len) << text;
  EXPECT_TRUE(t["font_px"] >= min_px && t["font_px"] <= max_px);
  const int tx = t["x"], ty = t["y"], tw = t["w"], th = t["h"];
  for (const nlohmann::json& o : objects) {
    const int ox = o["x"], oy = o["y"], r = o["radius"];
    const int dx = std::max({tx - ox, 0, ox - (tx + tw)}), dy = std::max({ty - oy, 0, oy - (ty + th)});
    EXPECT_GE(dx * dx + dy * dy, r * r) << "text over an object in " << id;
  }
}

/// Runs the CLI; returns its exit status and fills `out` with stdout+stderr.
inline int run_cli(const std::string& args, std::string* out, const test::TempDir& tmp) {
  const std::string log = tmp / "cli.log";
  const int status =
      std::system((std::string(::vispco::testing::cli_path()) + " " + args + " > " + log + " 2>&1").c_str());
  *out = read_file(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace vispco::eval::synthvqa
