// The vocabulary model under a Tokenizer (io/tokenizer.h): text segments ↔ ids, special ids and pieces. One
// implementation per tokenizer format: SentencePiece's tokenizer.model (io/spm_tokenizer.h) today; a model
// family whose checkpoints ship another format (Hugging Face tokenizer.json byte-level BPE) adds its own.
// Added tokens (tokenizer_config.json / added_tokens.json) are matched by Tokenizer itself, above the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vispco::io {

/// A tokenizer's vocabulary model, without added tokens. Immutable once built (shared between copies).
class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  /// The format's name in messages, e.g. "SentencePiece".
  virtual std::string format() const = 0;
  /// Ids of one text segment (no BOS; the text holds no added token). @throws Error when the format's
  /// library fails.
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// Text of a run of the model's own ids (in [0, vocab_size()), no BOS/EOS/pad). @param after_added the run
  /// follows an added token in the id sequence (SentencePiece then keeps a leading "▁" as a space instead of
  /// dropping it as the dummy prefix). @throws Error when the format's library fails.
  virtual std::string decode(const std::vector<int64_t>& ids, bool after_added) const = 0;
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  /// Pad id, or −1 when the model defines none.
  virtual int64_t pad_id() const = 0;
  /// Number of ids of the model (pieces), not counting added tokens above it.
  virtual int64_t vocab_size() const = 0;
  /// The piece of `id` in the format's spelling ("▁star", "<0x0A>", "Ġstar"); id in [0, vocab_size()).
  virtual std::string piece(int64_t id) const = 0;
  /// What `id` contributes to decoded text, as bytes (OpenAI's logprobs "bytes"); "" for control ids.
  /// id in [0, vocab_size()).
  virtual std::string piece_bytes(int64_t id) const = 0;
};

}  // namespace vispco::io
