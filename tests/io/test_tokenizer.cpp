// Tests of the SentencePiece wrapper on a small BPE model trained here (Llama settings), and of the
// LLaVA-1.5 prompt layout: BOS + "USER: " + <image> + "\n{question} ASSISTANT:".
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "core/errors.h"
#include "io/tokenizer.h"
#include "model/llava/llava_prompt.h"

namespace vispco::io {
namespace {

namespace fs = std::filesystem;

/// A few hundred CLEVR-like question/answer lines, with multi-digit numbers that BPE would merge
/// without split_digits.
std::vector<std::string> make_corpus() {
  const std::vector<std::string> colours{"red", "green", "blue", "yellow", "purple", "cyan", "gray", "brown"};
  const std::vector<std::string> shapes{"cube", "sphere", "cylinder"};
  std::vector<std::string> out;
  for (int i = 0; i < 240; ++i) {
    const std::string& col = colours[i % colours.size()];
    const std::string& shape = shapes[(i / colours.size()) % shapes.size()];
    out.push_back("what colour is the " + shape + "? " + col);
    out.push_back("how many " + shape + "s are there? " + std::to_string(i % 13));
    out.push_back("is there a " + col + " " + shape + " left of the sphere? " + (i % 2 ? "yes" : "no"));
    out.push_back("the sign says 12 and " + std::to_string(100 + i) + ", then 1234");
  }
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TokenizerTest : public ::testing::Test {
 protected:
  static constexpr int kVocab = 400;

  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("vispco_tok_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    model_path_ = (dir_ / "tokenizer.model").string();
    train_sentencepiece(make_corpus(), kVocab, model_path_);
    tok_ = new Tokenizer(Tokenizer::load(model_path_));
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
    fs::remove_all(dir_);
  }
  static const Tokenizer& tok() { return *tok_; }

  static inline fs::path dir_;
  static inline std::string model_path_;
  static inline Tokenizer* tok_ = nullptr;
};

TEST_F(TokenizerTest, HasLlamaSpecialIds) {
  EXPECT_EQ(tok().bos_id(), 1);
  EXPECT_EQ(tok().eos_id(), 2);
  EXPECT_EQ(tok().pad_id(), -1);
  EXPECT_EQ(tok().vocab_size(), kVocab);
}

TEST_F(TokenizerTest, RoundTripsText) {
  for (const std::string s : {"what colour is the cube? red", "how many spheres are there? 7",
                              "Unseen Words, two  spaces\nand a newline", "caf\xc3\xa9 \xe2\x9c\x93"}) {
    const auto ids = tok().encode(s, /*add_bos=*/false);
    EXPECT_EQ(tok().decode(ids), s);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 0) << "unk in '" << s << "' (byte fallback expected)";
  }
}

TEST_F(TokenizerTest, SplitsDigitsIntoSinglePieces) {
  for (const std::string number : {"1234", "12", "3571"}) {
    std::string joined;
    for (const int64_t id : tok().encode(number, false)) {
      const std::string piece = tok().decode({id});
      if (piece.empty()) continue;  // the dummy-prefix "▁" piece
      EXPECT_EQ(piece.size(), 1u) << "piece '" << piece << "' of " << number;
      joined += piece;
    }
    EXPECT_EQ(joined, number);
  }
}

TEST_F(TokenizerTest, PrependsBosOnRequest) {
  const auto plain = tok().encode("is there a red cube?", false);
  const auto with_bos = tok().encode("is there a red cube?", true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], tok().bos_id());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
}

TEST_F(TokenizerTest, DecodeSkipsSpecialAndImageIds) {
  const auto ids = tok().encode("the blue sphere", false);
  std::vector<int64_t> noisy{tok().bos_id(), tok().vocab_size(), -200};
  noisy.insert(noisy.end(), ids.begin(), ids.end());
  noisy.push_back(tok().vocab_size() + 5);
  noisy.push_back(tok().eos_id());
  EXPECT_EQ(tok().decode(noisy), "the blue sphere");
}

TEST_F(TokenizerTest, LlavaPromptHasOneImageIdAfterUserPrefix) {
  const int64_t image_id = tok().vocab_size();  // as HF LLaVA: 32000 for a 32000-piece model
  const auto ids = llava_prompt_ids(tok(), "What is this?", image_id);
  const auto prefix = tok().encode("USER: ", /*add_bos=*/true);
  ASSERT_GT(ids.size(), prefix.size() + 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), image_id), 1);
  ASSERT_TRUE(std::equal(prefix.begin(), prefix.end(), ids.begin()));
  EXPECT_EQ(ids[prefix.size()], image_id);

  const std::vector<int64_t> before(ids.begin(), ids.begin() + prefix.size());
  const std::vector<int64_t> after(ids.begin() + prefix.size() + 1, ids.end());
  EXPECT_EQ(tok().decode(before), "USER: ");
  EXPECT_EQ(tok().decode(after), "\nWhat is this? ASSISTANT:");
  // LLaVA layout around the image: "... :" "▁" <image> "▁" "\n" (Llama ids 29901 29871 32000 29871 13).
  EXPECT_EQ(tok().decode({prefix.back()}), "");  // lone "▁" decodes to nothing
  EXPECT_EQ(tok().decode({after[0]}), "");
  EXPECT_EQ(tok().decode({after[1]}), "\n");
  EXPECT_EQ(after, tok().encode("\nWhat is this? ASSISTANT:", false));
}

TEST_F(TokenizerTest, LlavaPromptTreatsImageTagInQuestionAsText) {
  const auto ids = llava_prompt_ids(tok(), "<image> twice?", -200);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), -200), 1);
  EXPECT_EQ(tok().decode(ids), "USER:  \n<image> twice? ASSISTANT:");  // "▁" either side of the image id
  EXPECT_THROW(llava_prompt_ids(tok(), "x", 5), InvalidArgument);
}

TEST_F(TokenizerTest, TrainingIsDeterministic) {
  const std::string again = (dir_ / "again.model").string();
  train_sentencepiece(make_corpus(), kVocab, again);
  EXPECT_EQ(read_bytes(again), read_bytes(model_path_));
}

TEST_F(TokenizerTest, LargeVocabOnTinyCorpusGivesFewerPieces) {
  const std::string p = (dir_ / "tiny.model").string();
  train_sentencepiece({"a red cube", "a blue sphere", "two cubes"}, 2000, p);
  const Tokenizer t = Tokenizer::load(p);
  EXPECT_LT(t.vocab_size(), 2000);
  EXPECT_EQ(t.decode(t.encode("a red sphere", true)), "a red sphere");
}

TEST_F(TokenizerTest, TrainingRejectsImpossibleSettings) {
  const std::string p = (dir_ / "bad.model").string();
  EXPECT_THROW(train_sentencepiece(make_corpus(), 50, p), Error);  // byte fallback needs >= 259 + chars
  EXPECT_THROW(train_sentencepiece({}, 400, p), InvalidArgument);
  EXPECT_THROW(train_sentencepiece(make_corpus(), 400, (dir_ / "no/such/dir/x.model").string()), IoError);
}

TEST_F(TokenizerTest, NonModelFileIsFormatErrorNamingPath) {
  const std::string p = (dir_ / "not_a_model.model").string();
  std::ofstream(p) << "hello world this is text\n";
  try {
    Tokenizer::load(p);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::from_serialized("hello world this is text\n"), FormatError);
  EXPECT_THROW(Tokenizer::from_serialized(""), FormatError);
}

TEST_F(TokenizerTest, MissingFileIsIoError) {
  EXPECT_THROW(Tokenizer::load((dir_ / "missing.model").string()), IoError);
  EXPECT_THROW(Tokenizer().encode("x", true), InvalidArgument);  // never loaded
}

}  // namespace
}  // namespace vispco::io
