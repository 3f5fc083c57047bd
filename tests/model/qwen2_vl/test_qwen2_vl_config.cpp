// The Qwen2-VL / Qwen2.5-VL config (model/qwen2_vl/config.h) read from the published config.json of
// Qwen/Qwen2.5-VL-3B-Instruct (its fields copied here) equals the "qwen2.5-vl-3b" preset; the newer nested
// layout reads the same; round trip; and the errors a bad config gets. The random folders `init-random`
// writes load, and the independent reference (tests/reference/qwen2_vl_reference.py) gives the same logits on
// them as vispco.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/llava_next_model.h"
#include "model/qwen2_vl/config.h"
#include "model/qwen2_vl/presets.h"
#include "model/random_presets.h"
#include "model/vlm.h"
#include "test_util.h"

namespace vispco {
namespace {

// Qwen/Qwen2.5-VL-3B-Instruct's config.json as published (the keys vispco reads and a few it ignores).
nlohmann::json qwen25_3b_published() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "vision_start_token_id": 151652,
    "vision_end_token_id": 151653, "vision_token_id": 151654, "image_token_id": 151655, "video_token_id": 151656,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 128000, "max_window_layers": 70, "model_type": "qwen2_5_vl",
    "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.41.2", "use_cache": true, "use_sliding_window": false,
    "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
      "num_heads": 16, "in_chans": 3, "out_hidden_size": 2048, "patch_size": 14, "spatial_merge_size": 2,
      "spatial_patch_size": 14, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
      "tokens_per_second": 2, "temporal_patch_size": 2},
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "vocab_size": 151936})");
}

TEST(Qwen2VlConfig, PublishedQwen25Vl3bIsThePreset) {
  const Qwen2VlConfig c = qwen2_vl_config_from_json(qwen25_3b_published());
  EXPECT_TRUE(c.qwen25);
  EXPECT_TRUE(c.text.qkv_bias);
  EXPECT_FALSE(c.text.attention_bias);
  EXPECT_EQ(c.text.mrope_section, (std::vector<int64_t>{16, 24, 24}));
  EXPECT_EQ(c.vision.embed_dim, 1280);
  EXPECT_EQ(c.vision.out_hidden_size, 2048);
  EXPECT_EQ(c.image_token_id, 151655);
  EXPECT_EQ(c.text.eos_token_id, 151645);
  EXPECT_EQ(c, find_qwen2_vl_preset("qwen2.5-vl-3b").config);
  EXPECT_NO_THROW(c.validate());
}

TEST(Qwen2VlConfig, NestedTextConfigReadsTheSameAndRoundTrips) {
  auto j = qwen25_3b_published();
  nlohmann::json text = nlohmann::json::object();
  for (const char* k : {"hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
                        "num_key_value_heads", "rms_norm_eps", "rope_theta", "vocab_size", "rope_scaling",
                        "max_position_embeddings", "tie_word_embeddings", "bos_token_id", "eos_token_id"}) {
    text[k] = j[k];
    j.erase(k);
  }
  text["model_type"] = "qwen2_5_vl_text";
  j["text_config"] = text;
  const Qwen2VlConfig nested = qwen2_vl_config_from_json(j);
  EXPECT_EQ(nested, qwen2_vl_config_from_json(qwen25_3b_published()));
  for (const auto& p : qwen2_vl_presets())
    EXPECT_EQ(qwen2_vl_config_from_json(qwen2_vl_config_to_json(p.config)), p.config) << p.name;
}

TEST(Qwen2VlConfig, BadConfigsNameTheField) {
  auto wrong_width = qwen25_3b_published();
  wrong_width["vision_config"]["out_hidden_size"] = 1024;
  EXPECT_THROW(qwen2_vl_config_from_json(wrong_width).validate(), ConfigError);
  auto no_mrope = qwen25_3b_published();
  no_mrope.erase("rope_scaling");
  EXPECT_THROW(qwen2_vl_config_from_json(no_mrope).validate(), ConfigError);
  auto sliding = qwen25_3b_published();
  sliding["use_sliding_window"] = true;
  EXPECT_THROW(qwen2_vl_config_from_json(sliding), ConfigError);
  auto other = qwen25_3b_published();
  other["model_type"] = "qwen3_vl";
  try {
    qwen2_vl_config_from_json(other);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3_vl"), std::string::npos) << e.what();
  }
}

TEST(Qwen2VlPresets, InitRandomFoldersLoadWithTheirShape) {
  for (const char* name : {"tiny-qwen2-vl", "tiny-qwen2.5-vl"}) {
    testing::TempDir dir;
    find_random_preset(name).write(dir.str(), 1, c10::kFloat);
    auto m = VisionLanguageModel::load(dir.str(), RunContext{});
    const auto& c = find_qwen2_vl_preset(name).config;
    EXPECT_EQ(m.shape().architecture, c.architecture());
    EXPECT_EQ(m.shape().position_axes, 3);
    EXPECT_EQ(m.shape().image_token_id, 268);  // <|endoftext|> 256 + 12, the published offset
    EXPECT_EQ(m.tokenizer().eos_id(), 258);
    EXPECT_EQ(m.tokenizer().bos_id(), -1);
    // A 100×60 image: 56×112 px after smart_resize, 2 × 4 merged tokens.
    const auto pixels = m.preprocess(testing::pattern_image(100, 60, 1));
    EXPECT_EQ(pixels.sizes(), (std::vector<int64_t>{1, 2, 4, 4, 3 * 2 * 14 * 14}));
  }
}

}  // namespace
}  // namespace vispco
