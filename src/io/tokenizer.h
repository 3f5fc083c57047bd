// SentencePiece tokenizer (the Llama `tokenizer.model` format) and the LLaVA-1.5 prompt template
// "USER: <image>\n{question} ASSISTANT:" with the <image> placeholder mapped to config.image_token_index.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace vispco::io {

/// A loaded SentencePiece model. Special ids come from the model (bos_id, eos_id, pad_id, unk_id).
class Tokenizer {
 public:
  /// Loads `tokenizer.model`. @throws IoError when missing, FormatError when not a SentencePiece model.
  static Tokenizer load(const std::string& path);
  /// Loads from the serialized model proto bytes. @throws FormatError.
  static Tokenizer from_serialized(const std::string& proto);

  /// Token ids of `text` (SentencePiece adds its dummy-prefix space as Llama's slow tokenizer does),
  /// BOS prepended when `add_bos`.
  std::vector<int64_t> encode(const std::string& text, bool add_bos) const;
  /// Text of `ids`; BOS/EOS/pad and ids ≥ vocab_size() (e.g. the image token) are skipped.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t bos_id() const;
  int64_t eos_id() const;
  /// Pad id, or −1 when the model defines none.
  int64_t pad_id() const;
  /// Number of pieces in the SentencePiece model.
  int64_t vocab_size() const;

 private:
  std::shared_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

/// Trains a SentencePiece BPE model on `sentences` with `vocab_size` pieces (ids: 0 unk, 1 <s>, 2 </s>,
/// as Llama) and writes it to `out_path`. Digits are split into single pieces (as Llama). Deterministic for
/// the same input. @throws Error when training fails (e.g. vocab_size too large for the text), IoError.
void train_sentencepiece(const std::vector<std::string>& sentences, int vocab_size,
                         const std::string& out_path);

/// LLaVA-1.5 prompt ids: BOS + "USER: " + [image_token_index] + "\n{question} ASSISTANT:", with exactly one
/// image placeholder id (the pipeline expands it to N_v visual tokens). A "<image>" inside `question` is
/// treated as plain text.
std::vector<int64_t> encode_llava_prompt(const Tokenizer& tok, const std::string& question,
                                         int64_t image_token_index);

}  // namespace vispco::io
