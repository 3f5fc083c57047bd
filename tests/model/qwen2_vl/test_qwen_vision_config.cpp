// The Qwen2-VL / Qwen2.5-VL vision config (model/qwen2_vl/vision_config.h): the published vision_config
// objects of Qwen/Qwen2-VL-7B-Instruct and Qwen/Qwen2.5-VL-7B-Instruct parse to the towers they describe,
// absent fields take the transformers class defaults, to_json round-trips, and bad fields are named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/qwen2_vl/vision_config.h"

namespace vispco {
namespace {

using nlohmann::json;

// Qwen/Qwen2-VL-7B-Instruct's config.json "vision_config" (no hidden_act: quick_gelu by default).
json qwen2_vl_7b() {
  return json::parse(R"({"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
    "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
    "temporal_patch_size": 2})");
}

// Qwen/Qwen2.5-VL-7B-Instruct's.
json qwen25_vl_7b() {
  return json::parse(R"({"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
    "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
    "spatial_patch_size": 14, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2, "temporal_patch_size": 2})");
}

std::string error_of(const json& j, bool qwen25) {
  try {
    qwen2_vision_config_from_json(j, qwen25);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(QwenVisionConfig, PublishedQwen2VlParses) {
  const auto c = qwen2_vision_config_from_json(qwen2_vl_7b(), false);
  EXPECT_EQ(c.arch, QwenVisionArch::kQwen2VL);
  EXPECT_FALSE(c.windowed_rms_swiglu());
  EXPECT_EQ(c.embed_dim, 1280);
  EXPECT_EQ(c.intermediate_size, 5120);  // 1280 · 4
  EXPECT_EQ(c.out_hidden_size, 3584);    // Qwen2-VL's vision_config.hidden_size is the LLM width
  EXPECT_EQ(c.hidden_act, "quick_gelu");
  EXPECT_EQ(c.head_dim(), 80);
  EXPECT_EQ(c.patch_values(), 1176);
  EXPECT_TRUE(c.full_attention_block(0));
  EXPECT_EQ(c.window_merged(), 0);
  EXPECT_EQ(qwen2_vision_config_from_json(to_json(c), false), c);
}

TEST(QwenVisionConfig, PublishedQwen25VlParses) {
  const auto c = qwen2_vision_config_from_json(qwen25_vl_7b(), true);
  EXPECT_TRUE(c.windowed_rms_swiglu());
  EXPECT_EQ(c.embed_dim, 1280);  // Qwen2.5-VL's vision_config.hidden_size is the ViT width
  EXPECT_EQ(c.intermediate_size, 3420);
  EXPECT_EQ(c.out_hidden_size, 3584);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.window_merged(), 4);  // 112 / 14 / 2
  EXPECT_EQ(c.fullatt_block_indexes, (std::vector<int64_t>{7, 15, 23, 31}));
  EXPECT_TRUE(c.full_attention_block(7));
  EXPECT_FALSE(c.full_attention_block(8));
  EXPECT_EQ(c.tokens_per_second, 2);
  const json j = to_json(c);
  EXPECT_EQ(j["hidden_size"], 1280);
  EXPECT_EQ(j["out_hidden_size"], 3584);
  EXPECT_EQ(j["in_chans"], 3);
  EXPECT_FALSE(j.contains("embed_dim"));
  EXPECT_EQ(qwen2_vision_config_from_json(j, true), c);
}

TEST(QwenVisionConfig, AbsentFieldsTakeTheClassDefaults) {
  EXPECT_EQ(qwen2_vision_config_from_json(json::object(), false), Qwen2VisionConfig{});
  const auto c = qwen2_vision_config_from_json(json::object(), true);
  EXPECT_EQ(c, qwen25_vision_defaults());
  EXPECT_EQ(c.embed_dim, 3584);  // Qwen2_5_VLVisionConfig's own default, unlike the published 1280
  EXPECT_EQ(c.tokens_per_second, 4);
}

TEST(QwenVisionConfig, AFractionalMlpRatioTruncatesAndRoundTrips) {
  auto j = qwen2_vl_7b();
  j["embed_dim"] = 48;
  j["num_heads"] = 4;
  j["mlp_ratio"] = 2.7;  // 48 · 2.7 = 129.6 → 129
  const auto c = qwen2_vision_config_from_json(j, false);
  EXPECT_EQ(c.intermediate_size, 129);
  EXPECT_EQ(qwen2_vision_config_from_json(to_json(c), false), c);
}

TEST(QwenVisionConfig, BadFieldsAreNamed) {
  auto j = qwen2_vl_7b();
  j["num_heads"] = 7;
  EXPECT_NE(error_of(j, false).find("num_heads 7"), std::string::npos) << error_of(j, false);
  j = qwen2_vl_7b();
  j["depth"] = "32";
  EXPECT_NE(error_of(j, false).find("vision_config.depth"), std::string::npos) << error_of(j, false);
  j = qwen25_vl_7b();
  j["window_size"] = 100;
  EXPECT_NE(error_of(j, true).find("window_size 100"), std::string::npos) << error_of(j, true);
  j = qwen25_vl_7b();
  j["fullatt_block_indexes"] = {7, 32};
  EXPECT_NE(error_of(j, true).find("fullatt_block_indexes holds 32"), std::string::npos) << error_of(j, true);
  j = qwen25_vl_7b();
  j["hidden_act"] = "relu6";
  EXPECT_NE(error_of(j, true).find("hidden_act 'relu6'"), std::string::npos) << error_of(j, true);
  j = qwen25_vl_7b();
  j["num_heads"] = 128;  // head dim 1280 / 128 = 10
  EXPECT_NE(error_of(j, true).find("multiple of 4"), std::string::npos) << error_of(j, true);
  EXPECT_NE(error_of(json::array(), true).find("JSON object"), std::string::npos);
}

}  // namespace
}  // namespace vispco
