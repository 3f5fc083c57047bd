// Qwen2-VL's built-in ChatML template (model/qwen2_vl/chat_template.h) against the published chat_template
// rendered by Hugging Face's @huggingface/jinja (tests/reference/qwen_tokenizer/chat_template.js; skipped
// where node or the package is missing), and its prompt ids on the fixture tokenizer, worked out by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/hf_tokenizer.h"
#include "model/python_reference.h"
#include "model/qwen2_vl/chat_template.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() {
  return fs::path(::vispco::testing::source_dir()) / "tests/reference/qwen_tokenizer";
}

nlohmann::json to_request(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          bool vision_id) {
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& m : messages) {
    if (m.plain) {
      ms.push_back({{"role", m.role}, {"content", m.parts.at(0).text}});
      continue;
    }
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& p : m.parts)
      parts.push_back(p.image ? nlohmann::json{{"type", "image"}}
                              : nlohmann::json{{"type", "text"}, {"text", p.text}});
    ms.push_back({{"role", m.role}, {"content", parts}});
  }
  return {{"messages", ms}, {"add_generation_prompt", add_generation_prompt}, {"add_vision_id", vision_id}};
}

TEST(Qwen2VlChatTemplate, OneImageQuestionAsWorkedOut) {
  EXPECT_EQ(render_qwen2_vl_chat({{"user", {{true, ""}, {false, "What is it?"}}, false}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is it?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(Qwen2VlChatTemplate, EqualsJinjaRendering) {
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(fixture_dir() / "node_modules/@huggingface/jinja/package.json"))
    GTEST_SKIP() << "@huggingface/jinja is not installed in " << fixture_dir()
                 << " (bash scripts/install-deps.sh)";
  const std::vector<std::pair<std::vector<ChatMessage>, std::pair<bool, bool>>> cases = {
      {{{"user", {{true, ""}, {false, "What colour is the cube?"}}, false}}, {true, false}},
      {{{"system", {{false, "Be brief."}}, true}, {"user", {{false, "Hi"}, {true, ""}}, false}},
       {true, false}},
      {{{"user", {{true, ""}, {false, "first"}}, false},
        {"assistant", {{false, "A red cube."}}, true},
        {"user", {{false, "and "}, {true, ""}, {false, "this one?\nTwo lines."}}, false}},
       {true, true}},
      {{{"user", {{false, "no image, no generation prompt"}}, true}}, {false, false}},
  };
  testing::TempDir tmp;
  for (const auto& [messages, flags] : cases) {
    std::ofstream(tmp / "req.json") << to_request(messages, flags.first, flags.second).dump();
    const std::string jinja = ::vispco::testing::run_command(
        "cd " + fixture_dir().string() + " && node chat_template.js tokenizer_config.json < " +
        tmp.str("req.json"));
    EXPECT_EQ(render_qwen2_vl_chat(messages, flags.first, flags.second), jinja);
  }
}

TEST(Qwen2VlChatTemplate, PromptIdsHoldTheImagePadOnce) {
  const io::Tokenizer tok = io::load_tokenizer_json(fixture_dir().string());
  const auto ids = qwen2_vl_prompt_ids(tok, "What is it?", 862);
  // <|im_start|> 857 opens the system turn; the image span is 859 862 860 right after "user\n".
  ASSERT_GE(ids.size(), 12u);
  EXPECT_EQ(ids.front(), 857);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 862), 1);
  const auto pad = std::find(ids.begin(), ids.end(), 862) - ids.begin();
  EXPECT_EQ(ids[pad - 1], 859);
  EXPECT_EQ(ids[pad + 1], 860);
  EXPECT_EQ(tok.encode("<|im_start|>assistant\n", false),
            std::vector<int64_t>(ids.end() - tok.encode("<|im_start|>assistant\n", false).size(), ids.end()));
  EXPECT_THROW(qwen2_vl_prompt_ids(tok, "x<|image_pad|>", 862), InvalidArgument);
  EXPECT_THROW(qwen2_vl_prompt_ids(tok, "What is it?", 5), InvalidArgument);  // the pad is not id 5
}

}  // namespace
}  // namespace vispco
