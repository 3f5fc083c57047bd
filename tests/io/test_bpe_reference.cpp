// vispco's byte-level BPE against two independent encoders on a small Qwen2-style tokenizer.json
// (tests/reference/qwen_tokenizer: trained by make_fixture.py, 68+ multilingual strings in corpus.json):
// Hugging Face's own tokenizers library through its Node binding (npm `tokenizers`, hf_tokenizers.js) and a
// Python encoder written from the format (bpe_reference.py, python3-regex). Each is skipped, saying why,
// where its runtime is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/hf_tokenizer.h"
#include "io/utf8.h"
#include "model/python_reference.h"
#include "test_paths.h"

namespace vispco::io {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() {
  return fs::path(::vispco::testing::source_dir()) / "tests/reference/qwen_tokenizer";
}

std::vector<std::string> corpus() {
  std::ifstream in(fixture_dir() / "corpus.json");
  return nlohmann::json::parse(in).get<std::vector<std::string>>();
}

// Every corpus string's ids from vispco, and the count of strings that differ from `ref` (printed).
int count_mismatches(const nlohmann::json& ref, const char* who) {
  const Tokenizer tok = load_tokenizer_json(fixture_dir().string());
  const auto texts = corpus();
  EXPECT_EQ(ref.size(), texts.size());
  int bad = 0;
  size_t n_ids = 0;
  for (size_t i = 0; i < texts.size() && i < ref.size(); ++i) {
    const auto ids = tok.encode(texts[i], /*add_bos=*/true);  // no BOS in Qwen2: nothing is prepended
    n_ids += ids.size();
    if (ids != ref[i].get<std::vector<int64_t>>()) {
      ++bad;
      ADD_FAILURE() << who << " disagrees on corpus string " << i << ": '" << texts[i]
                    << "'\n  vispco: " << ::vispco::testing::comma_joined(ids) << "\n  " << who << ": "
                    << ref[i].dump();
    }
  }
  std::printf("%s: %zu strings, %zu ids, %d disagreements\n", who, texts.size(), n_ids, bad);
  return bad;
}

TEST(BpeReference, EqualsHuggingFaceTokenizers) {
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(fixture_dir() / "node_modules/tokenizers/package.json"))
    GTEST_SKIP() << "the tokenizers npm package is not installed in " << fixture_dir()
                 << " (bash scripts/install-deps.sh; npm's registry unreachable?)";
  const std::string out = ::vispco::testing::run_command(
      "cd " + fixture_dir().string() + " && node hf_tokenizers.js tokenizer.json < corpus.json");
  ASSERT_FALSE(out.empty()) << "hf_tokenizers.js printed nothing";
  EXPECT_EQ(count_mismatches(nlohmann::json::parse(out), "HF tokenizers"), 0);
}

TEST(BpeReference, EqualsPythonReference) {
  if (std::system("/usr/bin/python3 -c 'import regex' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3 with python3-regex is not installed (apt-get install python3-regex)";
  const std::string out = ::vispco::testing::run_command(
      "cd " + fixture_dir().string() + " && /usr/bin/python3 bpe_reference.py tokenizer.json < corpus.json");
  ASSERT_FALSE(out.empty()) << "bpe_reference.py printed nothing";
  EXPECT_EQ(count_mismatches(nlohmann::json::parse(out), "bpe_reference.py"), 0);
}

TEST(BpeReference, DecodeGivesBackTheNfcText) {
  const Tokenizer tok = load_tokenizer_json(fixture_dir().string());
  int checked = 0;
  for (const auto& text : corpus()) {
    if (text.find("<|") != std::string::npos) continue;  // special tokens are skipped when decoding
    EXPECT_EQ(tok.decode(tok.encode(text, false)), utf8_nfc(text)) << text;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace vispco::io
