// SentencePiece's tokenizer.model as a TokenizerModel (io/tokenizer_model.h): the Llama format. SentencePiece
// itself runs in the shim library libvispco_spm.so (io/spm_backend.h).
#pragma once
#include <memory>
#include <string>

#include "io/spm_model_proto.h"
#include "io/tokenizer_model.h"

namespace vispco::io {
namespace detail {
class SpmProcessor;  // spm_backend.h
}

/// A loaded SentencePiece model. Special ids come from the model (bos_id, eos_id, pad_id, unk_id).
class SpmTokenizerModel final : public TokenizerModel {
 public:
  /// Parses serialized ModelProto bytes; `source` names them in errors. @throws FormatError when they are not
  /// a SentencePiece model; Error when the shim library cannot be loaded.
  SpmTokenizerModel(const std::string& proto, const std::string& source);

  std::string format() const override { return "SentencePiece"; }
  /// SentencePiece adds its dummy-prefix space, as Llama's slow tokenizer does.
  std::vector<int64_t> encode(const std::string& text) const override;
  /// SentencePiece drops the run's leading dummy-prefix space (kept as ' ' after an added token).
  std::string decode(const std::vector<int64_t>& ids, bool after_added) const override;
  int64_t bos_id() const override;
  int64_t eos_id() const override;
  int64_t pad_id() const override;
  int64_t vocab_size() const override;
  std::string piece(int64_t id) const override;
  /// The piece with "▁" as a space, a byte-fallback piece "<0xHH>" as that byte, BOS/EOS/pad as "".
  std::string piece_bytes(int64_t id) const override;
  /// The piece's score (BPE: merge priority) and type, as a GGUF vocabulary stores them.
  float score(int64_t id) const;
  SpmPieceType type(int64_t id) const;

 private:
  std::shared_ptr<const detail::SpmProcessor> sp_;
};

}  // namespace vispco::io
