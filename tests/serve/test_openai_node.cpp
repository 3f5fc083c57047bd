// A real client: the official `openai` package for Node (installed by scripts/install-deps.sh into
// tests/serve/node) sends an image chat completion, streamed and not, to the server and reads the answer.
// Skipped, saying why, where node or the package is missing (npm unreachable when the deps were installed).
#include <gtest/gtest.h>

#include <filesystem>

#include "model/generate.h"
#include "server_fixture.h"
#include "test_paths.h"

namespace vispco {
namespace {

using nlohmann::json;

TEST(OpenAiNodeClient, ChatCompletionStreamedAndNot) {
  const std::filesystem::path dir =
      std::filesystem::path(::vispco::testing::source_dir()) / "tests/serve/node";
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(dir / "node_modules/openai/package.json"))
    GTEST_SKIP() << "the openai npm package is not installed in " << dir
                 << " (scripts/install-deps.sh installs it where npm's registry can be reached)";
  testing::ServerFixture f;
  testing::TempDir tmp;
  const auto png = testing::test_png(64, 21);
  testing::write_file(tmp / "img.png", png);
  const std::string q = "How many cubes are there?";
  FILE* p = popen(("cd " + dir.string() + " && node openai_client.mjs " + std::to_string(f.port()) + " " +
                   tmp.str("img.png") + " '" + q + "' 2>&1")
                      .c_str(),
                  "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
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

}  // namespace
}  // namespace vispco
