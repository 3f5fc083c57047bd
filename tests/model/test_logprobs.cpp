// Log-probabilities of generated tokens: hand-computed values on made-up logits, the pieces' bytes, and
// `vispco generate --top-logprobs` on the tiny model.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "model/logprobs.h"
#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco {
namespace {

TEST(TokenLogprobs, AreLogSoftmaxOfTheStepLogitsWithTheTopAlternativesFirst) {
  const auto tok = io::Tokenizer::load(testing::tiny_model_dir() + "/tokenizer.model");
  const int64_t V = tok.vocab_size(), a = 10, b = 20, c = 30;
  // Step 0: logits 0 except ln 4 at a and ln 2 at b, so Z = (V − 2) + 4 + 2 = V + 4 and p(a) = 4 / (V + 4).
  // Step 1: all equal, so every log-probability is −ln V.
  auto s0 = at::zeros({2, V}), s1 = at::zeros({2, V});
  s0[1][a] = std::log(4.0);
  s0[1][b] = std::log(2.0);
  const std::vector<at::Tensor> steps = {s0, s1, s1};  // a third step: the EOS one, not in tokens
  const auto lp = token_logprobs(steps, /*row=*/1, {b, c}, /*top_n=*/2, tok);
  ASSERT_EQ(lp.size(), 2u);
  const double z = std::log(double(V + 4));
  EXPECT_EQ(lp[0].chosen.id, b);
  EXPECT_NEAR(lp[0].chosen.logprob, std::log(2.0) - z, 1e-6);
  ASSERT_EQ(lp[0].top.size(), 2u);
  EXPECT_EQ(lp[0].top[0].id, a);
  EXPECT_NEAR(lp[0].top[0].logprob, std::log(4.0) - z, 1e-6);
  EXPECT_EQ(lp[0].top[1].id, b);
  EXPECT_NEAR(lp[1].chosen.logprob, -std::log(double(V)), 1e-6);
  EXPECT_EQ(lp[1].chosen.piece, tok.piece(c));
  EXPECT_THROW(token_logprobs(steps, 1, {b}, 21, tok), InvalidArgument);
  EXPECT_THROW(token_logprobs(steps, 2, {b}, 1, tok), InvalidArgument);
  EXPECT_THROW(token_logprobs({s0}, 1, {b, c}, 1, tok), InvalidArgument);
  // OpenAI's layout: token text, logprob, its bytes as integers, the alternatives.
  const auto j = to_openai_json(lp);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["id"], b);
  EXPECT_EQ(j[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(j[0]["bytes"].size(), tok.piece_bytes(b).size());
}

TEST(TokenizerPieces, SpellSpacesAndByteFallbackAsText) {
  const auto tok = io::Tokenizer::load(testing::tiny_model_dir() + "/tokenizer.model");
  const auto ids = tok.encode("cube", false);  // the dummy prefix makes the first piece start with "▁"
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok.piece(ids[0]).rfind("\xe2\x96\x81", 0), 0u) << tok.piece(ids[0]);
  std::string text;
  for (auto id : ids) text += tok.piece_bytes(id);
  EXPECT_EQ(text, " cube");
  const auto nl = tok.encode("\n", false);  // byte fallback: "▁" then "<0x0A>"
  ASSERT_FALSE(nl.empty());
  EXPECT_EQ(tok.piece(nl.back()), "<0x0A>");
  EXPECT_EQ(tok.piece_bytes(nl.back()), "\n");
  EXPECT_EQ(tok.piece_bytes(tok.eos_id()), "");
  EXPECT_THROW(tok.piece(tok.vocab_size()), InvalidArgument);
}

TEST(GenerateCli, TopLogprobsFollowTheGreedyTokens) {
  testing::TempDir tmp;
  const std::string image = tmp.str("img.png");
  cv::imwrite(image, cv::Mat(40, 60, CV_8UC3, cv::Scalar(10, 200, 30)));
  auto r = testing::run_cli("generate --model " + testing::tiny_model_dir() + " --image " + image +
                            " --prompt 'What colour?' --max-new-tokens 3 --json --top-logprobs 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& content = j["logprobs"]["content"];
  ASSERT_EQ(content.size(), j["tokens"].size());
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(content[i]["id"], j["tokens"][i]);
    ASSERT_EQ(content[i]["top_logprobs"].size(), 4u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(content[i]["top_logprobs"][0]["id"], content[i]["id"]);
    EXPECT_DOUBLE_EQ(content[i]["top_logprobs"][0]["logprob"].get<double>(),
                     content[i]["logprob"].get<double>());
    EXPECT_LE(content[i]["logprob"].get<double>(), 0.0);
  }
  auto bad = testing::run_cli("generate --model " + testing::tiny_model_dir() + " --image " + image +
                              " --prompt q --top-logprobs 21");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--top-logprobs must be in [0, 20]"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace vispco
