// `vispco bench` end to end on the tiny preset: JSON output with the FLOPs model's figures, table output,
// the pruning sweep (--sweep-keep / --sweep-plan, --model), and one-line errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace vispco {
namespace {

TEST(CliBench, TinyPresetJson) {
  const auto r =
      testing::run_cli("bench --preset tiny --repeats 1 --threads 1 --n-text 9 --dtype fp32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["preset"], "tiny");
  EXPECT_EQ(j["dtype"], "fp32");
  EXPECT_EQ(j["dtype_choice"], "fp32 (asked)");
  EXPECT_EQ(j["n_visual"], 16);
  EXPECT_EQ(j["n_text"], 9);
  EXPECT_EQ(j["n_layers_limit"], 0);
  EXPECT_GT(j["prefill_ms"].get<double>(), 0);
  EXPECT_EQ(j["flops"]["decoder"].size(), 4u);
}

TEST(CliBench, TableWithTruncatedDepthInBf16) {
  const auto r = testing::run_cli("bench --preset tiny --repeats 1 --threads 1 --dtype bf16 --layers 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("truncated by --layers 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matmul [56, 64] x [64, 128]"), std::string::npos) << r.out;
}

TEST(CliBench, UnknownPresetIsOneLineError) {
  const auto r = testing::run_cli("bench --preset nope");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: unknown preset 'nope'", 0), 0u) << r.err;
}

TEST(CliBench, SweepJsonHasOneRowPerPlanAndK) {
  const auto r = testing::run_cli(
      "bench --preset tiny --repeats 1 --threads 1 --n-text 9 --dtype fp32 --sweep-keep 16,4 --sweep-plan "
      "fastv:layer=2 "
      "--sweep-plan visionzip:layer=0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 5u);  // the reference + 2 templates × 2 K
  EXPECT_EQ(j["rows"][0]["plan"], "none");
  EXPECT_EQ(j["rows"][2]["plan"], "fastv:layer=2,keep=4");
  EXPECT_EQ(j["rows"][2]["tokens_per_layer"], nlohmann::json({25, 25, 13, 13}));
  EXPECT_EQ(j["rows"][4]["plan"], "visionzip:layer=0,keep=4");
  EXPECT_EQ(j["rows"][4]["tokens_per_layer"], nlohmann::json({13, 13, 13, 13}));
  EXPECT_EQ(j["rows"][4]["kv_cache_bytes"].get<int64_t>(), 4 * (2 * 2 * 13 * 16 * 4 + 13));
}

TEST(CliBench, SweepTableWithSemicolonSeparatedTemplates) {
  const auto r = testing::run_cli(
      "bench --preset tiny --repeats 1 --threads 1 --sweep-keep 8 --sweep-plan "
      "'fastv:layer=2;visionzip:layer=0'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fastv:layer=2 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("visionzip:layer=0 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;
}

TEST(CliBench, SweepOnAModelFolder) {
  testing::TempDir tmp;
  const auto init = testing::run_cli("init-random --preset tiny --out " + tmp.str("m"));
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const auto r =
      testing::run_cli("bench --model " + tmp.str("m") +
                       " --repeats 1 --threads 1 --sweep-keep 4 --sweep-plan fastv:layer=2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "model " + tmp.str("m"));
  EXPECT_EQ(j["rows"].size(), 2u);
  const auto bad = testing::run_cli("bench --model " + tmp.str("m") + " --layers 2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("full depth"), std::string::npos) << bad.err;
}

TEST(CliBench, BadSweepSpecIsOneLineError) {
  const auto expect_error = [](const std::string& args, const std::string& start) {
    const auto r = testing::run_cli("bench --preset tiny --threads 1 " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err.rfind("error: " + start, 0), 0u) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  };
  expect_error("--sweep-keep 16,abc --sweep-plan fastv:layer=2",
               "sweep keep list '16,abc': 'abc' is not an integer");
  expect_error("--sweep-keep 17 --sweep-plan fastv:layer=2", "sweep K 17 is outside [1, N_v = 16]");
  expect_error("--sweep-keep 8", "--sweep-keep needs --sweep-plan");
  expect_error("--sweep-plan fastv:layer=2", "--sweep-plan needs --sweep-keep");
  expect_error("--sweep-keep 8 --sweep-plan fastv:layer=2,keep=4",
               "sweep plan 'fastv:layer=2,keep=4' fixes keep=");
  expect_error("--sweep-keep 8 --sweep-plan fastv:layer=0", "sweep plan 'fastv:layer=0' at K=8: plan stage");
  expect_error("--sweep-keep 8 --sweep-plan nope:layer=1",
               "sweep plan 'nope:layer=1' at K=8: unknown scorer 'nope'");
}

}  // namespace
}  // namespace vispco
