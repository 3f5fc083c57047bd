// Loading a Hugging Face LLaVA folder by name: older and newer transformers key layouts, sharded checkpoints,
// config parsing with HF defaults.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/default_dtype.h"
#include "core/errors.h"
#include "io/safetensors.h"
#include "model/llava/config.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_model_dir;

// Every parameter of `m` equals the same-named parameter of a freshly built random net with the same seed.
void expect_weights_of_seed(VisionLanguageModel& m, uint64_t seed) {
  auto expect = random_llava_net(m.config(), seed, at::kFloat);
  auto want = expect->named_parameters(true);
  size_t n = 0;
  for (const auto& item : m.net()->named_parameters(true)) {
    ASSERT_TRUE(want.contains(item.key())) << item.key();
    EXPECT_TRUE(at::equal(item.value(), want[item.key()])) << item.key();
    ++n;
  }
  EXPECT_EQ(n, want.size());
}

TEST(LlavaLoad, LoadsOlderLayoutByName) {
  auto m = VisionLanguageModel::load(tiny_model_dir(), RunContext{});
  EXPECT_EQ(m.config(), find_preset("tiny").config);
  expect_weights_of_seed(m, 7);
}

TEST(LlavaLoad, LoadsNewerLayoutFromShards) {
  // Rename every key to the transformers ≥ 4.52 layout and split into two shards with an index.
  TempDir tmp;
  const auto src = fs::path(tiny_model_dir());
  const auto dst = tmp.path() / "new";
  fs::create_directories(dst);
  for (const char* f : {"config.json", "tokenizer.model", "preprocessor_config.json"})
    fs::copy(src / f, dst / f);
  auto file = io::SafetensorsFile::open((src / "model.safetensors").string());
  std::map<std::string, at::Tensor> shard[2];
  nlohmann::json weight_map;
  int i = 0;
  for (const auto& [name, info] : file.entries()) {
    const std::string key = testing::newer_layout_key(name);
    const int s = (i++) % 2;
    shard[s][key] = file.tensor(name).clone();
    weight_map[key] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s)
    io::save_safetensors((dst / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors")).string(),
                         shard[s]);
  testing::write_file(dst / "model.safetensors.index.json",
                      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  EXPECT_TRUE(weight_map.contains("lm_head.weight"));
  EXPECT_TRUE(weight_map.contains("model.language_model.layers.0.self_attn.q_proj.weight"));
  auto m = VisionLanguageModel::load(dst.string(), RunContext{});
  expect_weights_of_seed(m, 7);
}

TEST(LlavaLoad, Bf16CheckpointConvertsToComputeDtype) {
  TempDir tmp;
  const auto& cfg = find_preset("tiny").config;
  write_random_llava(tmp.str("bf16"), cfg, 7, at::kBFloat16);
  auto m32 = VisionLanguageModel::load(tmp.str("bf16"), RunContext{});
  auto w = m32.net()->language_model->model->norm->weight;
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  RunContext bf;
  bf.dtype = at::kBFloat16;
  auto m16 = VisionLanguageModel::load(tmp.str("bf16"), bf);
  auto q32 = m32.net()->named_parameters()["language_model.model.layers.0.self_attn.q_proj.weight"];
  auto q16 = m16.net()->named_parameters()["language_model.model.layers.0.self_attn.q_proj.weight"];
  EXPECT_EQ(q16.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(q16.to(at::kFloat), q32));  // bf16 → fp32 is exact
  // The network was built in bf16 for loading; the process default is fp32 again afterwards.
  EXPECT_EQ(at::get_default_dtype(), caffe2::TypeMeta::Make<float>());
}

TEST(DefaultDtypeGuard, RestoresThePreviousDefaultAlsoWhenUnwinding) {
  ASSERT_EQ(at::get_default_dtype(), caffe2::TypeMeta::Make<float>());
  try {
    DefaultDtypeGuard guard(at::kBFloat16);
    EXPECT_EQ(at::empty({2}).scalar_type(), at::kBFloat16);
    throw InvalidArgument("unwind");
  } catch (const InvalidArgument&) {
  }
  EXPECT_EQ(at::get_default_dtype(), caffe2::TypeMeta::Make<float>());
  EXPECT_EQ(at::empty({2}).scalar_type(), at::kFloat);
}

TEST(LlavaConfig, RealLlava15ConfigTakesHfDefaults) {
  // The text_config of llava-hf/llava-1.5-7b-hf omits most Llama fields; HF fills LlamaConfig defaults.
  auto j = nlohmann::json::parse(R"({
    "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100, "image_token_index": 32000,
    "model_type": "llava", "pad_token_id": 32001, "projector_hidden_act": "gelu",
    "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
      "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05, "torch_dtype": "float16",
      "vocab_size": 32064},
    "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.36.0.dev0",
    "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
      "model_type": "clip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14,
      "projection_dim": 768, "vocab_size": 32000},
    "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "vocab_size": 32064})");
  auto c = llava_config_from_json(j);
  c.validate();
  EXPECT_EQ(c.text.hidden_size, 4096);
  EXPECT_EQ(c.text.num_hidden_layers, 32);
  EXPECT_EQ(c.text.intermediate_size, 11008);
  EXPECT_EQ(c.text.n_kv_heads(), 32);
  EXPECT_EQ(c.n_visual_tokens(), 576);
  EXPECT_EQ(c.n_vision_layers_used(), 23);
  EXPECT_EQ(c.vision.hidden_act, "quick_gelu");
  EXPECT_EQ(c, find_preset("llava-1.5-7b").config);
  // JSON round trip keeps every field.
  EXPECT_EQ(llava_config_from_json(llava_config_to_json(c)), c);
}

TEST(LlavaConfig, ValidateNamesTheBadField) {
  auto c = find_preset("tiny").config;
  c.text.num_key_value_heads = 3;
  try {
    c.validate();
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads 3"), std::string::npos) << e.what();
  }
  auto j = llava_config_to_json(find_preset("tiny").config);
  j["model_type"] = "mistral";
  EXPECT_THROW(llava_config_from_json(j), ConfigError);
}

}  // namespace
}  // namespace vispco
