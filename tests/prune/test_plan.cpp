// Pruning plans: compact syntax, PyramidDrop shorthand, JSON, canonical text, and the invalid-plan messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/llava/presets.h"
#include "prune/plan.h"
#include "test_util.h"

namespace vispco {
namespace {

const ModelShape tiny_cfg() { return preset_shape("tiny", 0); }  // 4 decoder layers, N_v = 16

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

TEST(Plan, KeepAsAShareOfEachImagesTokens) {
  auto p = parse_plan("divprune:keep=25%+fastv:layer=2,keep=12.5%", 16);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(p.stages[0].keep_percent, 25.0);
  EXPECT_EQ(p.stages[0].keep, 4);  // the nominal count: 25 % of N_v = 16
  EXPECT_EQ(p.stages[1].keep, 2);
  EXPECT_EQ(p.to_string(), "divprune:layer=0,keep=25%+fastv:layer=2,keep=12.5%");
  EXPECT_EQ(parse_plan(p.to_string(), 16), p);
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  EXPECT_NE(parse_plan("divprune:keep=4", 16), parse_plan("divprune:keep=25%", 16));  // distinct store keys
  // Per image: 25 % of 54 tokens is 13.5 → 14 (half away from zero); of 3 tokens 0.75 → 1; never below 1.
  EXPECT_EQ(resolve_keep(p.stages[0], 54), 14);
  EXPECT_EQ(resolve_keep(p.stages[0], 3), 1);
  EXPECT_EQ(resolve_keep(p.stages[1], 4), 1);
  EXPECT_EQ(resolve_keep(PruneStage{0, 7, "random", {}}, 100), 7);  // a count stays a count
  // Decimal shares round as written: 1.4 % of 250 is 3.5 → 4 (doubles: 1.4 / 100 · 250 = 3.4999…96), 12.5 %
  // of 4 is 0.5 → 1, 0.1 % of 2928 is 2.928 → 3.
  const auto share = [](const char* text, int64_t n) {
    return resolve_keep(parse_plan(text, 16).stages.at(0), n);
  };
  EXPECT_EQ(share("divprune:keep=1.4%", 250), 4);
  EXPECT_EQ(share("divprune:keep=12.5%", 4), 1);
  EXPECT_EQ(share("divprune:keep=0.1%", 2928), 3);
  EXPECT_EQ(share("divprune:keep=25.3%", 100), 25);
  EXPECT_EQ(share("divprune:keep=25.5%", 100), 26);
  for (const char* bad : {"divprune:keep=0%", "divprune:keep=101%", "divprune:keep=x%", "divprune:keep=%"})
    EXPECT_THROW(parse_plan(bad, 16), InvalidArgument) << bad;
  EXPECT_EQ(error_of("divprune:keep=100%"), "");
}

TEST(Plan, PyramidDropShorthandHalvesAtEachBoundary) {
  // N_v = 576, ratio 0.5 at layers 8, 16, 24 → 288, 144, 72 (PyramidDrop's λ = 0.5 schedule).
  auto p = parse_plan("pdrop:layers=8/16/24,ratio=0.5", 576);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0], (PruneStage{8, 288, "fastv", {}}));
  EXPECT_EQ(p.stages[1], (PruneStage{16, 144, "fastv", {}}));
  EXPECT_EQ(p.stages[2], (PruneStage{24, 72, "fastv", {}}));
}

TEST(Plan, AStageWithoutLayerActsAtItsMethodsPaperLayer) {
  // FastV §4 (K pruned after layer 2), SparseVLM and DART at ℓ = 2; the methods before the LLM and the
  // baselines at ℓ = 0 (issue 22's list).
  const std::pair<const char*, int64_t> want[] = {
      {"fastv", 2}, {"sparsevlm", 2}, {"dart", 2},   {"visionzip", 0}, {"divprune", 0}, {"cdpruner", 0},
      {"gate", 0},  {"pool", 0},      {"random", 0}, {"uniform", 0},   {"grad", 0}};
  for (const auto& [name, layer] : want) {
    auto p = parse_plan(std::string(name) + ":keep=64", 576);
    ASSERT_EQ(p.stages.size(), 1u) << name;
    EXPECT_EQ(p.stages[0].layer, layer) << name;
    EXPECT_EQ(p.stages[0].keep, 64) << name;
  }
  // The resolved plan is what reports and result-store keys print.
  EXPECT_EQ(parse_plan("fastv:keep=64", 576).to_string(), "fastv:layer=2,keep=64");
  EXPECT_EQ(parse_plan("fastv:keep=64,layer=5", 576).stages[0].layer, 5);  // an explicit layer wins
}

TEST(Plan, PyramidDropDefaultsToQuarterLayersAndKeepSetsTheRatio) {
  // L = 32: layers 8, 16, 24 with λ = 0.5, as PyramidDrop's LLaVA-1.5 setting.
  auto p = parse_plan("pdrop:ratio=0.5", 576, 32);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0], (PruneStage{8, 288, "fastv", {}}));
  EXPECT_EQ(p.stages[2], (PruneStage{24, 72, "fastv", {}}));
  // keep=72 over three stages: λ = (72/576)^(1/3) = 0.5 exactly → the same plan.
  EXPECT_EQ(parse_plan("pdrop:keep=72", 576, 32), p);
  // L = 8, keep=64: layers 2, 4, 6; λ = (1/9)^(1/3) = 0.48075 → 576·λ = 276.9 → 277, 576·λ² = 133.1 →
  // 133, 64.
  auto q = parse_plan("pdrop:keep=64", 576, 8);
  ASSERT_EQ(q.stages.size(), 3u);
  EXPECT_EQ(q.stages[0], (PruneStage{2, 277, "fastv", {}}));
  EXPECT_EQ(q.stages[1], (PruneStage{4, 133, "fastv", {}}));
  EXPECT_EQ(q.stages[2], (PruneStage{6, 64, "fastv", {}}));
  // Through the model's config: the tiny preset has 4 layers → 1, 2, 3.
  auto t = parse_plan("pdrop:ratio=0.5", tiny_cfg());
  EXPECT_EQ(t.to_string(), "fastv:layer=1,keep=8+fastv:layer=2,keep=4+fastv:layer=3,keep=2");
  EXPECT_THROW(parse_plan("pdrop:ratio=0.5", 576), InvalidArgument);              // L unknown and no layers=
  EXPECT_THROW(parse_plan("pdrop:ratio=0.5,keep=72", 576, 32), InvalidArgument);  // one or the other
  EXPECT_THROW(parse_plan("pdrop:keep=600", 576, 32), InvalidArgument);
  EXPECT_THROW(parse_plan("pdrop:layer=2,ratio=0.5", 576, 32), InvalidArgument);
}

TEST(Plan, ReadsJsonFile) {
  testing::TempDir tmp;
  testing::write_file(
      tmp.path() / "p.json",
      R"({"stages": [{"scorer": "divprune", "layer": 0, "keep": 6}, {"scorer": "fastv", "layer": 2, "keep": 3}]})");
  auto p = parse_plan(tmp.str("p.json"), 16);
  EXPECT_EQ(p.to_string(), "divprune:layer=0,keep=6+fastv:layer=2,keep=3");
  EXPECT_THROW(parse_plan(tmp.str("missing.json"), 16), IoError);
}

TEST(Plan, InvalidPlansNameTheProblem) {
  EXPECT_NE(error_of("fastv:layer=2,keep=17").find("keep 17 is outside [1, N_v = 16]"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=2,keep=-1").find("keep -1 is outside"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=4,keep=4").find("layer 4 is outside [0, 4)"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=1,keep=4+fastv:layer=2,keep=8").find("K must not increase"),
            std::string::npos);
  EXPECT_NE(error_of("fastv:layer=2,keep=4+fastv:layer=1,keep=2").find("must come after"), std::string::npos);
  EXPECT_NE(error_of("magic:layer=1,keep=4").find("unknown scorer 'magic' (valid: fastv"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=1,keep=4,temp=2").find("unknown option 'temp'"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=0,keep=4").find("layer must be ≥ 1"), std::string::npos);
  EXPECT_NE(error_of("visionzip:layer=1,keep=4").find("before the LLM only"), std::string::npos);
  EXPECT_NE(error_of("pool:layer=0,keep=5").find("must be a square"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=2").find("needs keep=K"), std::string::npos);
  EXPECT_NE(error_of("magic:keep=4").find("unknown scorer 'magic'"), std::string::npos);
  EXPECT_NE(error_of("fastv:layer=two,keep=4").find("integer (got 'two')"), std::string::npos);
  EXPECT_EQ(error_of("fastv:layer=1,keep=16+fastv:layer=3,keep=1"), "");
}

}  // namespace
}  // namespace vispco
