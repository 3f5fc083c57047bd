// What the SynthVQA and SynthVQA-HR tests share: re-deriving answers from the written record (plural shape
// names, the text family), the loop that compares every sample's answer with its derivation, and running
// the CLI with its output captured. Used by test_synthvqa.cpp and test_synthvqa_hr.cpp.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

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

/// Runs the CLI; returns its exit status and fills `out` with stdout+stderr.
inline int run_cli(const std::string& args, std::string* out, const test::TempDir& tmp) {
  const std::string log = tmp / "cli.log";
  const int status =
      std::system((std::string(::vispco::testing::cli_path()) + " " + args + " > " + log + " 2>&1").c_str());
  *out = read_file(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace vispco::eval::synthvqa
