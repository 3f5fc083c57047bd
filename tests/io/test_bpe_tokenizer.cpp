// Byte-level BPE (io/bpe_model.h, io/pre_tokenizer.h, io/hf_tokenizer.h) on a hand-built tokenizer.json: the
// expected ids are worked out by hand from GPT-2's byte table (openai/gpt-2 encoder.py) and Qwen2's split
// pattern; the comparison with Hugging Face's own tokenizers on a trained vocabulary is in
// test_bpe_reference.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/bpe_model.h"
#include "io/hf_tokenizer.h"
#include "io/pre_tokenizer.h"
#include "io/utf8.h"
#include "test_util.h"

namespace vispco::io {
namespace {

const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

nlohmann::json qwen2_pre_tokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwen2Pattern}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

// UTF-8 of one code point, written out here rather than through io/utf8.h.
std::string cp(unsigned v) {
  if (v < 0x80) return std::string(1, static_cast<char>(v));
  if (v < 0x800) return {static_cast<char>(0xC0 | (v >> 6)), static_cast<char>(0x80 | (v & 0x3F))};
  return {static_cast<char>(0xE0 | (v >> 12)), static_cast<char>(0x80 | ((v >> 6) & 0x3F)),
          static_cast<char>(0x80 | (v & 0x3F))};
}

// GPT-2's table restated: bytes 0–32 → U+0100–U+0120, 127–160 → U+0121–U+0142, 173 → U+0143, others
// themselves.
std::string byte_char(int b) {
  if (b <= 32) return cp(0x100 + b);
  if (b >= 127 && b <= 160) return cp(0x121 + (b - 127));
  if (b == 173) return cp(0x143);
  return cp(b);
}

// Vocabulary: byte b has id b; then Ġt 256, he 257, Ġthe 258, aa 259 from four merges in that rank order.
nlohmann::json tiny_tokenizer(nlohmann::json merges = nullptr) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::string g = cp(0x120);  // 'Ġ', the space's character
  vocab[g + "t"] = 256, vocab["he"] = 257, vocab[g + "the"] = 258, vocab["aa"] = 259;
  if (merges.is_null()) merges = {g + " t", "h e", g + "t he", "a a"};
  return {{"version", "1.0"},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", qwen2_pre_tokenizer()},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens",
           {{{"id", 260}, {"content", "<|im_start|>"}, {"special", true}},
            {{"id", 261}, {"content", "<|im_end|>"}, {"special", true}},
            {{"id", 262}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", false}}}};
}

using Ids = std::vector<int64_t>;

TEST(ByteToUnicode, MatchesGpt2Table) {
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(0), U'\u0100');
  EXPECT_EQ(byte_to_unicode(127), U'\u0121');
  EXPECT_EQ(byte_to_unicode(173), U'\u0143');
  EXPECT_EQ(byte_to_unicode('a'), U'a');
  EXPECT_EQ(byte_to_unicode(0xE9), U'\u00E9');
}

TEST(PreTokenizer, SplitsAsQwen2Pattern) {
  const PreTokenizer pre(qwen2_pre_tokenizer(), "test");
  using V = std::vector<std::string>;
  // Digits one by one; "\s*[\r\n]+" takes the spaces and newlines; a letter run takes one leading space.
  EXPECT_EQ(pre.split("Hello world123  \n\n x"), (V{"Hello", " world", "1", "2", "3", "  \n\n", " x"}));
  // "\s+(?!\S)" leaves the last space of a run to the word after it.
  EXPECT_EQ(pre.split("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pre.split("DON'T stop"), (V{"DON", "'T", " stop"}));
  EXPECT_EQ(pre.split("x  "), (V{"x", "  "}));
  EXPECT_EQ(pre.split("(1.5)!"), (V{"(", "1", ".", "5", ")!"}));
  EXPECT_EQ(pre.split(""), V{});
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  const PreTokenizer pre(qwen2_pre_tokenizer(), "test");
  using V = std::vector<std::string>;
  // U+3000 (ideographic space) is White_Space: "\s+(?!\S)" takes the first of two, the word takes the second
  // as its one non-letter prefix. (Were it not \s, " ?[^\s\p{L}\p{N}]+" would take both.)
  EXPECT_EQ(pre.split("a\xE3\x80\x80\xE3\x80\x80"
                      "b"),
            (V{"a", "\xE3\x80\x80",
               "\xE3\x80\x80"
               "b"}));
  // U+180E (Mongolian vowel separator, Cf) is not White_Space, so it joins '!' in " ?[^\s\p{L}\p{N}]+".
  EXPECT_EQ(pre.split("!\xE1\xA0\x8E!"), (V{"!\xE1\xA0\x8E!"}));
  EXPECT_EQ(
      oniguruma_whitespace(R"(a\s[^\s\d]\S\\s[[:alpha:]\s])"),
      std::string(
          R"(a[\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])") +
          R"([^\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\d])" +
          R"([^\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]\\s)" +
          R"([[:alpha:]\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])");
  EXPECT_THROW(oniguruma_whitespace(R"([\S])"), FormatError);
}

TEST(PreTokenizer, Gpt2ByteLevelRegexAndPrefixSpace) {
  const PreTokenizer pre({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "test");
  using V = std::vector<std::string>;
  EXPECT_EQ(pre.split("Hello world's 123"), (V{" Hello", " world", "'s", " 123"}));
}

TEST(PreTokenizer, RemovedBehaviourDropsMatches) {
  const PreTokenizer pre({{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Removed"}},
                         "test");
  EXPECT_EQ(pre.split("a-b--c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(PreTokenizer, RejectsWhatItCannotRun) {
  EXPECT_THROW(
      PreTokenizer({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "MergedWithNext"}}, "t"),
      FormatError);
  EXPECT_THROW(
      PreTokenizer({{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}}, "t"),
      FormatError);
  EXPECT_THROW(PreTokenizer({{"type", "Metaspace"}}, "t"), FormatError);
  const PreTokenizer pre(qwen2_pre_tokenizer(), "test");
  EXPECT_THROW(pre.split("ab\xC3"), InvalidArgument);
}

TEST(ByteLevelBpe, MergesByRankAsWorkedOut) {
  const ByteLevelBpeModel m(tiny_tokenizer(), {}, "test");
  EXPECT_EQ(m.vocab_size(), 260);
  // "the": t h e → (h e) is rank 1; (t he) is no merge.
  EXPECT_EQ(m.encode("the"), (Ids{'t', 257}));
  // " the": Ġ t h e → Ġt (rank 0) → he (1) → Ġthe (2).
  EXPECT_EQ(m.encode(" the"), Ids{258});
  // Every occurrence of a pair merges, left to right: aaaa → aa aa; aaa → aa a.
  EXPECT_EQ(m.encode("aaaa"), (Ids{259, 259}));
  EXPECT_EQ(m.encode("aaa"), (Ids{259, 'a'}));
  // Merges never cross pieces: "the the" is "the" + " the".
  EXPECT_EQ(m.encode("the the"), (Ids{'t', 257, 258}));
  // A newline is byte 10's character 'Ċ', id 10.
  EXPECT_EQ(m.encode("a\nb"), (Ids{'a', 10, 'b'}));
}

TEST(ByteLevelBpe, NormalisesToNfcBeforeBytes) {
  const ByteLevelBpeModel m(tiny_tokenizer(), {}, "test");
  // "e" + U+0301 (combining acute) composes to U+00E9, bytes C3 A9.
  EXPECT_EQ(m.encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));
  auto no_nfc = tiny_tokenizer();
  no_nfc["normalizer"] = nullptr;
  EXPECT_EQ(ByteLevelBpeModel(no_nfc, {}, "test").encode("e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
  EXPECT_THROW(m.encode("\xFF"), InvalidArgument);
}

TEST(ByteLevelBpe, MergesAsPairsAndIgnoreMerges) {
  const std::string g = cp(0x120);
  const ByteLevelBpeModel pairs(
      tiny_tokenizer(
          nlohmann::json::array({nlohmann::json::array({g, "t"}), nlohmann::json::array({"h", "e"}),
                                 nlohmann::json::array({g + "t", "he"}), nlohmann::json::array({"a", "a"})})),
      {}, "test");
  EXPECT_EQ(pairs.encode(" the"), Ids{258});
  // With ignore_merges a whole piece in the vocabulary is one token even when no merge path leads to it.
  auto t = tiny_tokenizer(nlohmann::json::array({"h e"}));
  t["model"]["ignore_merges"] = true;
  EXPECT_EQ(ByteLevelBpeModel(t, {}, "test").encode(" the"), Ids{258});
  t["model"]["ignore_merges"] = false;
  EXPECT_EQ(ByteLevelBpeModel(t, {}, "test").encode(" the"), (Ids{32, 't', 257}));
}

TEST(ByteLevelBpe, DecodesBytesWithLossyUtf8) {
  const ByteLevelBpeModel m(tiny_tokenizer(), {}, "test");
  EXPECT_EQ(m.decode({258, 32, 'a'}, false), " the a");
  EXPECT_EQ(m.decode({0xE2, 0x82, 0xAC}, false), "\xE2\x82\xAC");  // "€"
  EXPECT_EQ(m.decode({'a', 0xE2, 0x82, 'b'}, false),
            "a\xEF\xBF\xBD"
            "b");  // a truncated "€" → one U+FFFD
  EXPECT_EQ(m.piece(32), cp(0x120));
  EXPECT_EQ(m.piece_bytes(258), " the");
  EXPECT_EQ(m.piece_bytes(0xE2), "\xE2");
  EXPECT_THROW(m.piece(260), InvalidArgument);
}

TEST(ByteLevelBpe, RejectsUnsupportedFiles) {
  auto wordpiece = tiny_tokenizer();
  wordpiece["model"]["type"] = "WordPiece";
  EXPECT_THROW(ByteLevelBpeModel(wordpiece, {}, "t"), FormatError);
  auto missing_byte = tiny_tokenizer();
  missing_byte["model"]["vocab"].erase(cp(0x120));
  EXPECT_THROW(ByteLevelBpeModel(missing_byte, {}, "t"), FormatError);
  EXPECT_THROW(ByteLevelBpeModel(tiny_tokenizer(nlohmann::json::array({"x yz"})), {}, "t"),
               FormatError);  // "yz" is no piece
  EXPECT_THROW(ByteLevelBpeModel(tiny_tokenizer(nlohmann::json::array({"abc"})), {}, "t"),
               FormatError);  // not two pieces
  auto lowercase = tiny_tokenizer();
  lowercase["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_THROW(ByteLevelBpeModel(lowercase, {}, "t"), FormatError);
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");          // truncated 4-byte: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // C0 never starts a sequence
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: three
  EXPECT_FALSE(utf8_valid("\xF4\x90\x80\x80"));                                   // above U+10FFFF
  EXPECT_TRUE(utf8_valid("\xF4\x8F\xBF\xBF"));
  EXPECT_EQ(utf8_nfc(std::string("A\0e\xCC\x81", 5)), std::string("A\0\xC3\xA9", 4));
}

TEST(HfTokenizerFolder, AddedAndSpecialTokens) {
  testing::TempDir dir;
  std::ofstream(dir / "tokenizer.json") << tiny_tokenizer().dump();
  std::ofstream(dir / "tokenizer_config.json") << nlohmann::json{
      {"bos_token", nullptr},
      {"eos_token", "<|im_end|>"},
      {"pad_token", {{"content", "<|endoftext|>"}}}}.dump();
  const Tokenizer tok = load_tokenizer_json(dir.str());
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.eos_id(), 261);
  EXPECT_EQ(tok.pad_id(), 262);
  // No BOS even when asked; added tokens are never split, the text between them is BPE.
  EXPECT_EQ(tok.encode("<|im_start|>the<|im_end|>", true), (Ids{260, 't', 257, 261}));
  EXPECT_EQ(tok.decode({260, 258, 261}), " the");

  std::ofstream(dir / "tokenizer_config.json") << nlohmann::json{{"eos_token", "<nope>"}}.dump();
  EXPECT_THROW(load_tokenizer_json(dir.str()), FormatError);
  EXPECT_THROW(load_tokenizer_json(dir / "absent"), IoError);
}

}  // namespace
}  // namespace vispco::io
