// `vispco bench` end to end on the tiny preset: JSON output with the FLOPs model's figures, table output,
// and a one-line error for an unknown preset.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace vispco {
namespace {

TEST(CliBench, TinyPresetJson) {
  const auto r = testing::run_cli("bench --preset tiny --repeats 1 --threads 1 --n-text 9 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["preset"], "tiny");
  EXPECT_EQ(j["dtype"], "fp32");  // the default
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

}  // namespace
}  // namespace vispco
