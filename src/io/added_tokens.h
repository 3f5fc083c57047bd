// Hugging Face "added tokens" of a model folder: tokens the tokenizer matches whole before SentencePiece sees
// the text (LLaVA's "<image>", chat markers), special or not. transformers reads them from tokenizer.json
// ("added_tokens": [{"id", "content", "special", …}]), tokenizer_config.json ("added_tokens_decoder":
// {"<id>": {"content", "special", …}}) and special_tokens_map.json (which contents are special).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vispco::io {

/// One added token.
struct AddedToken {
  int64_t id = 0;        ///< its id: inside the SentencePiece vocabulary (a user-defined piece) or after it
  std::string content;   ///< its text, matched whole ("<image>")
  bool special = false;  ///< special tokens are skipped when decoding (transformers' skip_special_tokens)
  bool operator==(const AddedToken&) const = default;
};

/// The added tokens declared in `dir`'s tokenizer.json, tokenizer_config.json and special_tokens_map.json
/// (any may be absent), merged by id and sorted by id; a content named in special_tokens_map.json is special.
/// Not read: lstrip / rstrip / single_word / normalized (all false in llava-hf's files, so matching is exact)
/// and the special-token names at tokenizer_config.json's top level.
/// @throws IoError when a present file cannot be read; FormatError naming the file when one is not valid
/// JSON, has the wrong shape, or two files give one id different contents.
std::vector<AddedToken> load_added_tokens(const std::string& dir);

/// Writes `dir`/tokenizer_config.json with `tokens` as "added_tokens_decoder" (transformers' layout) and
/// "tokenizer_class": "LlamaTokenizer". @throws IoError when it cannot be written.
void write_tokenizer_config(const std::string& dir, const std::vector<AddedToken>& tokens);

}  // namespace vispco::io
