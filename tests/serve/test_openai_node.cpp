// A real client: the official `openai` package for Node (installed by scripts/install-deps.sh into
// tests/serve/node) sends an image chat completion, streamed and not, to the server and reads the answer; and
// holds a three-turn conversation about one image (its later turns served from the image KV cache).
// Skipped, saying why, where node or the package is missing (npm unreachable when the deps were installed).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "model/generate.h"
#include "model/llava/llava_prompt.h"
#include "server_fixture.h"
#include "test_paths.h"

namespace vispco {
namespace {

using nlohmann::json;

std::filesystem::path node_dir() {
  return std::filesystem::path(::vispco::testing::source_dir()) / "tests/serve/node";
}

// Why the Node client tests cannot run here ("" when they can).
std::string node_missing(const std::filesystem::path& dir) {
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not installed";
  if (!std::filesystem::exists(dir / "node_modules/openai/package.json"))
    return "the openai npm package is not installed in " + dir.string() +
           " (scripts/install-deps.sh installs it where npm's registry can be reached)";
  return "";
}

// Runs `command` in a shell, stdout and stderr together: {exit status as pclose returns it, output}.
std::pair<int, std::string> run_shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return {pclose(p), out};
}

TEST(OpenAiNodeClient, ChatCompletionStreamedAndNot) {
  const std::filesystem::path dir = node_dir();
  if (const auto why = node_missing(dir); !why.empty()) GTEST_SKIP() << why;
  testing::ServerFixture f;
  testing::TempDir tmp;
  const auto png = testing::test_png(64, 21);
  testing::write_file(tmp / "img.png", png);
  const std::string q = "How many cubes are there?";
  const auto [status, out] = run_shell("cd " + dir.string() + " && node openai_client.mjs " +
                                       std::to_string(f.port()) + " " + tmp.str("img.png") + " '" + q + "'");
  ASSERT_EQ(status, 0) << out;
  const auto j = json::parse(out.substr(out.find('{')));
  GenerationConfig gc;
  gc.max_new_tokens = 6;
  auto& m = f.model();
  const auto want = generate(m, {{m.preprocess(io::decode_image_rgb(png)), m.prompt_ids(q)}}, gc);
  EXPECT_EQ(j["content"], want.texts[0]);
  EXPECT_EQ(j["streamed"], want.texts[0]);
  EXPECT_EQ(j["finish"], want.finish_reasons[0]);
  EXPECT_EQ(j["stream_finish"], want.finish_reasons[0]);
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(want.tokens[0].size()));
  EXPECT_EQ(j["models"], json::array({"tiny"}));
  EXPECT_EQ(j["refused_status"], 400);
}

TEST(OpenAiNodeClient, ThreeTurnConversationAboutOneImage) {
  const std::filesystem::path dir = node_dir();
  if (const auto why = node_missing(dir); !why.empty()) GTEST_SKIP() << why;
  testing::ServerFixture f;
  testing::TempDir tmp;
  const auto png = testing::test_png(64, 22);
  testing::write_file(tmp / "img.png", png);
  const std::string system = "Answer in one word.";
  const std::vector<std::string> qs = {"What colour is the cube?", "Is it large?", "How many spheres?"};
  const auto [status, out] =
      run_shell("cd " + dir.string() + " && node openai_chat.mjs " + std::to_string(f.port()) + " " +
                tmp.str("img.png") + " '" + system + "' '" + qs[0] + "' '" + qs[1] + "' '" + qs[2] + "'");
  ASSERT_EQ(status, 0) << out;
  const auto j = json::parse(out.substr(out.find('{')));
  // Each turn's answer as generate() gives it for vicuna_v1's ids written out here: "{system} USER: <image>\n
  // {q1} ASSISTANT:", then per earlier turn its answer + EOS and "USER: {q} ASSISTANT:" (the layout the
  // bundled model was trained on, train/teacher_forced_batch.cpp).
  auto& m = f.model();
  const auto& tok = m.tokenizer();
  GenerationConfig gc;
  gc.max_new_tokens = 6;
  std::vector<int64_t> ids = tok.encode(system + " USER: ", true);
  ids.push_back(m.shape().image_token_id);
  const auto first = tok.encode("\n" + qs[0] + " ASSISTANT:", false);
  ids.insert(ids.end(), first.begin(), first.end());
  const auto pixels = m.preprocess(io::decode_image_rgb(png));
  ASSERT_EQ(j["answers"].size(), qs.size()) << out;
  for (size_t t = 0; t < qs.size(); ++t) {
    if (t > 0) {
      const auto a = tok.encode(j["answers"][t - 1].get<std::string>(), false);
      ids.insert(ids.end(), a.begin(), a.end());
      ids.push_back(tok.eos_id());
      const auto q = llava_followup_ids(tok, qs[t]);
      ids.insert(ids.end(), q.begin(), q.end());
    }
    const auto want = generate(m, {{pixels, ids}}, gc);
    EXPECT_EQ(j["answers"][t], want.texts[0]) << "turn " << t;
  }
  EXPECT_EQ(j["image_cache"], json::array({"miss", "hit", "hit"})) << out;
}

}  // namespace
}  // namespace vispco
