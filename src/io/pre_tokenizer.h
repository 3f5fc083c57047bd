// tokenizer.json's "pre_tokenizer" for byte-level BPE: the text cut into pieces that BPE merges within, never
// across. Follows Hugging Face tokenizers 0.21 (pre_tokenizers/split.rs, byte_level.rs, sequence.rs); regexes
// run through PCRE2 in UTF + UCP mode (\p{L}, \s with Unicode semantics), as tokenizers runs them through
// Oniguruma.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::io {

/// A compiled pre-tokenizer: an ordered list of steps, each cutting every piece of the previous step.
/// Supported steps: {"type": "Split", "pattern": {"Regex"|"String": …}, "behavior": "Isolated"|"Removed",
/// "invert": false}; {"type": "ByteLevel", "use_regex": true|false, "add_prefix_space": …} (use_regex:
/// GPT-2's pattern, as Isolated); {"type": "Sequence", "pretokenizers": [...]}; null (no cut). Thread-safe
/// once built.
class PreTokenizer {
 public:
  /// @param spec tokenizer.json's "pre_tokenizer" value. @param where names it in errors.
  /// @throws FormatError for an unsupported type, behaviour, inverted split, or a pattern PCRE2 rejects
  /// (naming the pattern and PCRE2's message).
  PreTokenizer(const nlohmann::json& spec, const std::string& where);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  /// The pieces of `text` (valid UTF-8), in order; their concatenation is `text` except where a step removes
  /// matches (Removed) or adds a prefix space (add_prefix_space). Empty pieces are dropped.
  /// @throws InvalidArgument when `text` is not valid UTF-8; Error when PCRE2 fails (e.g. a match limit).
  std::vector<std::string> split(const std::string& text) const;

  /// GPT-2's pre-tokenizer pattern, which ByteLevel with use_regex = true applies.
  static const char* gpt2_pattern();

  /// One compiled step (defined in pre_tokenizer.cpp).
  struct Step;

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

/// `pattern` with \s (and \S outside a character class) spelled out as Unicode's White_Space set, the meaning
/// Oniguruma gives them; PCRE2's \s under PCRE2_UCP would also match U+180E. Escapes, classes and POSIX
/// [:name:] items are otherwise copied. @throws FormatError for \S inside a class.
std::string oniguruma_whitespace(const std::string& pattern);

}  // namespace vispco::io
