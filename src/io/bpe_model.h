// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2, Qwen2, Llama-3 style) as a TokenizerModel
// (io/tokenizer_model.h): NFC normaliser, pre-tokenizer (io/pre_tokenizer.h), GPT-2's byte→character map,
// merges applied by rank, ByteLevel decoder. Follows Hugging Face tokenizers 0.21 (models/bpe/model.rs,
// pre_tokenizers/byte_level.rs, normalizers/unicode.rs); added tokens are Tokenizer's (io/tokenizer.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/pre_tokenizer.h"
#include "io/tokenizer_model.h"

namespace vispco::io {

/// The ids a byte-level BPE tokenizer treats as BOS / EOS / pad (tokenizer_config.json's bos_token,
/// eos_token, pad_token resolved to ids); −1 where the tokenizer has none (Qwen2 has no BOS).
struct SpecialIds {
  int64_t bos = -1;
  int64_t eos = -1;
  int64_t pad = -1;
};

/// A byte-level BPE vocabulary model. Immutable and thread-safe once built and shared.
class ByteLevelBpeModel final : public TokenizerModel {
 public:
  /// Reads a parsed tokenizer.json. Supported: "normalizer" null or NFC (alone or in a Sequence); the
  /// pre-tokenizers of PreTokenizer; "model" {"type": "BPE", "vocab": {piece: id} with ids 0..V−1, "merges":
  /// ["a b", …] or [["a", "b"], …], "ignore_merges", no continuing_subword_prefix / end_of_word_suffix,
  /// byte_fallback false}; "decoder" ByteLevel or null. Every one of the 256 byte characters must be in the
  /// vocabulary. @param where names the file in errors.
  /// @throws FormatError naming the field for anything else (e.g. a WordPiece model, a missing merge piece).
  ByteLevelBpeModel(const nlohmann::json& tokenizer_json, SpecialIds specials, const std::string& where);

  std::string format() const override { return "byte-level BPE (tokenizer.json)"; }
  /// Ids of one text segment: NFC (if configured), pre-tokenized, each piece's bytes mapped to characters and
  /// merged by rank (lowest first, leftmost on ties). @throws InvalidArgument when `text` is not valid UTF-8.
  std::vector<int64_t> encode(const std::string& text) const override;
  /// The pieces' bytes concatenated, with invalid UTF-8 replaced by U+FFFD (from_utf8_lossy).
  /// `after_added` makes no difference (no dummy prefix).
  std::string decode(const std::vector<int64_t>& ids, bool after_added) const override;
  int64_t bos_id() const override { return specials_.bos; }
  int64_t eos_id() const override { return specials_.eos; }
  int64_t pad_id() const override { return specials_.pad; }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  /// The piece in byte-level spelling ("Ġstar" for " star"). @throws InvalidArgument outside [0, V).
  std::string piece(int64_t id) const override;
  /// The piece's raw bytes (possibly part of a UTF-8 character). @throws InvalidArgument outside [0, V).
  std::string piece_bytes(int64_t id) const override;
  /// Sets BOS / EOS / pad once their contents are resolved against the vocabulary (before the model is
  /// shared).
  void set_special_ids(SpecialIds ids) { specials_ = ids; }
  /// The id of `piece` (byte-level spelling), or −1.
  int64_t id_of(const std::string& piece) const;

 private:
  // pieces_[id]. @throws InvalidArgument outside [0, vocab_size()).
  const std::string& checked_piece(int64_t id) const;
  // Ids of one pre-tokenized piece (raw bytes).
  void encode_piece(const std::string& bytes, std::vector<int64_t>& out) const;

  struct Merge {
    int32_t rank;    // position in "merges": lower merges first
    int32_t merged;  // id of the merged piece
  };
  bool nfc_ = false;
  bool ignore_merges_ = false;
  PreTokenizer pre_;
  SpecialIds specials_;
  std::vector<std::string> pieces_;               // [V] byte-level spelling
  std::unordered_map<std::string, int32_t> ids_;  // piece → id
  std::unordered_map<uint64_t, Merge> merges_;    // (left id << 32 | right id) → merge
  int32_t byte_id_[256] = {};                     // id of each byte's one-character piece
};

/// GPT-2's reversible byte → code point map (openai/gpt-2 encoder.py bytes_to_unicode): printable bytes
/// '!'..'~', '¡'..'¬', '®'..'ÿ' map to themselves, the other 68 to U+0100.. in byte order (' ' → 'Ġ', '\n' →
/// 'Ċ').
char32_t byte_to_unicode(unsigned char b);

}  // namespace vispco::io
