// A Hugging Face model folder's tokenizer.json (byte-level BPE) as a Tokenizer: the vocabulary model, the
// added tokens of tokenizer.json / tokenizer_config.json, and the BOS / EOS / pad tokens named in
// tokenizer_config.json. Follows transformers' PreTrainedTokenizerFast loading (tokenizer_config.json's
// bos_token / eos_token / pad_token: a string, {"content": …} or null).
#pragma once
#include <string>

#include "io/tokenizer.h"

namespace vispco::io {

/// Loads `dir`/tokenizer.json (io/bpe_model.h) with its added tokens (io/added_tokens.h) and special ids.
/// @throws IoError when tokenizer.json is missing or unreadable; FormatError naming the file when it is not a
/// supported byte-level BPE tokenizer or a special token names a piece that is neither an added token nor in
/// the vocabulary.
Tokenizer load_tokenizer_json(const std::string& dir);

}  // namespace vispco::io
