// HF added tokens: reading them from the three tokenizer files, matching them whole when encoding, skipping
// special ones when decoding, and a checkpoint whose <image> is a piece inside its SentencePiece vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <opencv2/core.hpp>

#include "core/errors.h"
#include "io/added_tokens.h"
#include "io/tokenizer.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "model/tiny_model.h"
#include "test_util.h"

namespace vispco::io {
namespace {

using vispco::testing::TempDir;
using vispco::testing::write_file;

TEST(AddedTokens, MergeTheThreeFilesByIdAndMarkSpecialsFromTheMap) {
  TempDir tmp;
  write_file(tmp.path() / "tokenizer.json",
             R"({"added_tokens": [{"id": 32000, "content": "<image>", "special": true},
                                  {"id": 32001, "content": "<pad>", "special": false}]})");
  write_file(tmp.path() / "tokenizer_config.json",
             R"({"added_tokens_decoder": {"32000": {"content": "<image>", "special": true},
                                          "5": {"content": "<x>", "special": false}}})");
  write_file(tmp.path() / "special_tokens_map.json",
             R"({"pad_token": {"content": "<pad>", "lstrip": false}})");
  const auto t = load_added_tokens(tmp.str(""));
  const std::vector<AddedToken> want = {{5, "<x>", false}, {32000, "<image>", true}, {32001, "<pad>", true}};
  EXPECT_EQ(t, want);
  EXPECT_TRUE(load_added_tokens(tmp.str("nothing-here")).empty());
}

TEST(AddedTokens, RejectContradictionsAndMalformedFilesNamingTheFile) {
  TempDir tmp;
  write_file(tmp.path() / "tokenizer.json", R"({"added_tokens": [{"id": 32000, "content": "<image>"}]})");
  write_file(tmp.path() / "tokenizer_config.json",
             R"({"added_tokens_decoder": {"32000": {"content": "<img>"}}})");
  try {
    load_added_tokens(tmp.str(""));
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: added token 32000 is '<img>'"),
              std::string::npos)
        << e.what();
  }
  write_file(tmp.path() / "tokenizer_config.json",
             R"({"added_tokens_decoder": {"abc": {"content": "<img>"}}})");
  EXPECT_THROW(load_added_tokens(tmp.str("")), FormatError);
  write_file(tmp.path() / "tokenizer_config.json", "{not json");
  EXPECT_THROW(load_added_tokens(tmp.str("")), FormatError);
  write_file(tmp.path() / "tokenizer_config.json", R"({"added_tokens_decoder": {"7": {"special": true}}})");
  EXPECT_THROW(load_added_tokens(tmp.str("")), FormatError);  // no content
}

TEST(AddedTokens, AreNeverSplitWhenEncodingAndSpecialOnesVanishWhenDecoding) {
  TempDir tmp;
  train_sentencepiece(builtin_tokenizer_corpus(), 400, tmp.str("t.model"), {"<image>"});
  auto tok = Tokenizer::load(tmp.str("t.model"));
  EXPECT_EQ(tok.piece(3), "<image>");  // right after unk, BOS, EOS
  tok.set_added_tokens({{3, "<image>", true}, {tok.vocab_size() + 1, "<sep>", false}});
  // Segments around the added token are encoded on their own, each with its dummy prefix.
  std::vector<int64_t> want = tok.encode("red ", false);
  want.push_back(3);
  for (auto id : tok.encode("cube", false)) want.push_back(id);
  EXPECT_EQ(tok.encode("red <image>cube", false), want);
  // The special token is skipped; the space before it and cube's own dummy-prefix space both remain.
  EXPECT_EQ(tok.decode(want), "red  cube");
  const int64_t sep = tok.vocab_size() + 1;
  auto with_sep = tok.encode("red<sep>", false);
  EXPECT_EQ(with_sep.back(), sep);
  EXPECT_EQ(tok.decode(with_sep), "red<sep>");  // a non-special added token decodes to its content
  // The segment after it got its own dummy prefix when encoded; decoding keeps it as a space (HF's fast
  // decode).
  EXPECT_EQ(tok.decode(tok.encode("red<sep>cube", false)), "red<sep> cube");
  EXPECT_THROW(tok.set_added_tokens({{-1, "<x>", true}}), InvalidArgument);
}

TEST(AddedTokens, AModelWhoseImageTokenIsInsideTheVocabularyRuns) {
  TempDir tmp;
  auto cfg = find_preset("tiny").config;
  cfg.image_token_index = kImageTokenInsideVocab;
  write_random_llava(tmp.str("m"), cfg, 7, at::kFloat);
  auto m = VisionLanguageModel::load(tmp.str("m"), RunContext{});
  EXPECT_EQ(m.tokenizer().piece(3), "<image>");
  const auto ids = m.prompt_ids("What colour?");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 3), 1);
  EXPECT_EQ(ids[m.tokenizer().encode("USER: ", true).size()], 3);  // right after "USER: "
  GenerationConfig gc;
  gc.max_new_tokens = 2;
  auto out = generate(m, {{m.preprocess(cv::Mat(40, 40, CV_8UC3, cv::Scalar(0, 0, 255))), ids}}, gc);
  // The placeholder expanded to N_v = 16 visual tokens in the sequence the decoder saw.
  ASSERT_FALSE(out.stats.tokens_per_layer.empty());
  EXPECT_EQ(out.stats.tokens_per_layer[0], static_cast<int64_t>(ids.size()) - 1 + 16);
  // Without the added-token declaration, id 3 is an ordinary piece: refused with one clear line.
  std::filesystem::remove(tmp.path() / "m" / "tokenizer_config.json");
  auto plain = VisionLanguageModel::load(tmp.str("m"), RunContext{});
  try {
    plain.prompt_ids("What colour?");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("added_tokens_decoder"), std::string::npos) << e.what();
  }
  // A tokenizer whose <image> is not the id config.json replaces.
  write_tokenizer_config(tmp.str("m"), {{5, "<image>", true}});
  EXPECT_THROW(VisionLanguageModel::load(tmp.str("m"), RunContext{}), ConfigError);
}

}  // namespace
}  // namespace vispco::io
