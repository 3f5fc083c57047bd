// A model's tokenizer: a vocabulary model (io/tokenizer_model.h; SentencePiece's tokenizer.model today) plus
// the folder's added tokens, matched whole above it. Prompt templates belong to model families (model/).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/added_tokens.h"
#include "io/spm_model_proto.h"
#include "io/tokenizer_model.h"

namespace vispco::io {

class SpmTokenizerModel;  // spm_tokenizer.h

/// A loaded tokenizer. Special ids come from the model (bos_id, eos_id, pad_id). For SentencePiece models
/// SentencePiece itself runs in the shim library libvispco_spm.so (see spm_backend.h); load, from_serialized
/// and train_sentencepiece also throw Error when that library cannot be loaded. Copies share the model.
class Tokenizer {
 public:
  /// An empty tokenizer: every call but the assignments throws InvalidArgument.
  Tokenizer() = default;
  /// A tokenizer over any vocabulary model (a family's own format; tests). @throws InvalidArgument for null.
  explicit Tokenizer(std::shared_ptr<const TokenizerModel> model);
  /// Loads `tokenizer.model`. @throws IoError when missing, FormatError when not a SentencePiece model.
  static Tokenizer load(const std::string& path);
  /// Loads from the serialized model proto bytes. @throws FormatError.
  static Tokenizer from_serialized(const std::string& proto);

  /// Token ids of `text` (a SentencePiece model adds its dummy-prefix space as Llama's slow tokenizer does),
  /// BOS prepended when `add_bos` and the model has one (Qwen2 has none). Added tokens (set_added_tokens) are
  /// matched whole, longest first, and never split; the text between them is encoded segment by segment, each
  /// with its own dummy prefix (HF's legacy Llama tokenizer, LLaVA's tokenizer_image_token).
  std::vector<int64_t> encode(const std::string& text, bool add_bos) const;
  /// Text of `ids`; BOS/EOS/pad, special added tokens, negative ids and ids ≥ vocab_size() that are not added
  /// tokens (e.g. the image token) are skipped; a non-special added token gives its content. The leading
  /// dummy-prefix space is removed, as SentencePiece does.
  std::string decode(const std::vector<int64_t>& ids) const;
  /// The model folder's added tokens (io::load_added_tokens). @throws InvalidArgument for a negative id or an
  /// empty content.
  void set_added_tokens(std::vector<AddedToken> tokens);
  /// The added tokens set by set_added_tokens(), in the order given (load_added_tokens: by id).
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  /// The added token of `id`, or null.
  const AddedToken* added_token(int64_t id) const;
  int64_t bos_id() const;
  int64_t eos_id() const;
  /// Pad id, or −1 when the model defines none.
  int64_t pad_id() const;
  /// Number of ids of the vocabulary model (added tokens above it not counted).
  int64_t vocab_size() const;
  /// The model's piece of `id` ("▁star", "<0x0A>", "</s>"). @throws InvalidArgument outside
  /// [0, vocab_size()).
  std::string piece(int64_t id) const;
  /// SentencePiece only: the piece's score (BPE: merge priority) and type (SpmPieceType; a user-defined piece
  /// reads as kNormal, as SentencePiece cannot tell them apart) — what a GGUF vocabulary stores.
  /// @throws InvalidArgument outside [0, vocab_size()), or for a tokenizer of another format.
  float piece_score(int64_t id) const;
  SpmPieceType piece_type(int64_t id) const;
  /// What `id` contributes to the text, as bytes (OpenAI's logprobs "bytes"; SentencePiece: its piece with
  /// "▁" as a space, a byte-fallback piece "<0xHH>" as that byte, BOS/EOS/pad as "", unk's "<unk>" kept).
  /// @throws InvalidArgument outside [0, vocab_size()).
  std::string piece_bytes(int64_t id) const;
  /// The vocabulary model. @throws InvalidArgument for an empty tokenizer.
  const TokenizerModel& model() const;

 private:
  const SpmTokenizerModel& sentencepiece() const;
  std::shared_ptr<const TokenizerModel> model_;
  std::vector<AddedToken> added_;
};

/// Trains a SentencePiece BPE model on `sentences` with up to `vocab_size` pieces (ids: 0 unk, 1 <s>, 2 </s>,
/// no pad, as Llama) and writes the serialized model to `out_path` (its folder must exist). Llama's settings:
/// identity normalizer, dummy prefix, whitespace kept, digits split into single pieces, byte fallback (so
/// any UTF-8 text, "\n" included, round-trips). A vocab_size larger than the corpus supports yields fewer
/// pieces (hard_vocab_limit off). Deterministic for the same input (one thread).
/// @throws InvalidArgument for no sentences or vocab_size < 1; Error when training fails (vocab_size below
/// 259 + the number of distinct characters, needed by byte fallback); IoError when out_path is unwritable.
/// `user_defined_symbols` become whole pieces right after the control ids (3, 4, …), as a checkpoint that
/// keeps "<image>" inside its SentencePiece vocabulary has it; an empty one or one holding ',' throws
/// InvalidArgument.
void train_sentencepiece(const std::vector<std::string>& sentences, int vocab_size,
                         const std::string& out_path,
                         const std::vector<std::string>& user_defined_symbols = {});

}  // namespace vispco::io
