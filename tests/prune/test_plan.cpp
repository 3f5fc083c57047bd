// Pruning plans: compact syntax, PyramidDrop shorthand, JSON, canonical text, and the invalid-plan messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/presets.h"
#include "prune/plan.h"
#include "test_util.h"

namespace vispco {
namespace {

const LlavaConfig& tiny_cfg() { return find_preset("tiny").config; }  // 4 decoder layers, N_v = 16

std::string error_of(const std::string& text) {
  try {
    parse_plan(text, 16).validate(tiny_cfg());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Plan, ParsesStagesAndRoundTrips) {
  auto p = parse_plan("fastv:layer=1,keep=8+random:layer=3,keep=4", 16);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0], (PruneStage{1, 8, "fastv", {}}));
  EXPECT_EQ(p.stages[1], (PruneStage{3, 4, "random", {}}));
  EXPECT_EQ(parse_plan(p.to_string(), 16), p);
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  EXPECT_TRUE(parse_plan("none", 16).empty());
  EXPECT_EQ(parse_plan("", 16).to_string(), "none");
  auto v = parse_plan("visionzip:layer=0,keep=12,contextual=2", 16);
  EXPECT_EQ(v.stages[0].options.at("contextual"), "2");
  EXPECT_EQ(parse_plan(v.to_string(), 16), v);
}

TEST(Plan, PyramidDropShorthandHalvesAtEachBoundary) {
  // N_v = 576, ratio 0.5 at layers 8, 16, 24 → 288, 144, 72 (PyramidDrop's λ = 0.5 schedule).
  auto p = parse_plan("pdrop:layers=8/16/24,ratio=0.5", 576);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0], (PruneStage{8, 288, "fastv", {}}));
  EXPECT_EQ(p.stages[1], (PruneStage{16, 144, "fastv", {}}));
  EXPECT_EQ(p.stages[2], (PruneStage{24, 72, "fastv", {}}));
}

TEST(Plan, ReadsJsonFile) {
  testing::TempDir tmp;
  testing::write_file(tmp.path() / "p.json",
                      R"({"stages": [{"scorer": "divprune", "layer": 0, "keep": 6}, {"scorer": "fastv", "layer": 2, "keep": 3}]})");
  auto p = parse_plan(tmp.str("p.json"), 16);
  EXPECT_EQ(p.to_string(), "divprune:layer=0,keep=6+fastv:layer=2,keep=3");
  EXPECT_THROW(parse_plan(tmp.str("missing.json"), 16), IoError);
}

TEST(Plan, InvalidPlansNameTheProblem) {
  EXPECT_NE(error_of("fastv:layer=2,keep=17").find("keep 17 is outside [1, N_v = 16]"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=2,keep=-1").find("keep -1 is outside"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=4,keep=4").find("layer 4 is outside [0, 4)"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=1,keep=4+fastv:layer=2,keep=8").find("K must not increase"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=2,keep=4+fastv:layer=1,keep=2").find("must come after"), std::string::npos);
  EXPECT_NE(error_of("magic:layer=1,keep=4").find("unknown scorer 'magic' (valid: fastv"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=1,keep=4,temp=2").find("unknown option 'temp'"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=0,keep=4").find("layer must be ≥ 1"), std::string::npos);
  EXPECT_NE(error_of("visionzip:layer=1,keep=4").find("before the LLM only"), std::string::npos);
  EXPECT_NE(error_of("pool:layer=0,keep=5").find("must be a square"), std::string::npos);
  EXPECT_NE(error_of("fastv:keep=4").find("needs layer"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=two,keep=4").find("integer (got 'two')"), std::string::npos);
  EXPECT_EQ(error_of("fastv:layer=1,keep=16+fastv:layer=3,keep=1"), "");
}

}  // namespace
}  // namespace vispco
