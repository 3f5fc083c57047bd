// SentencePiece's tokenizer.model behind the TokenizerModel interface. Reference: HF `LlamaTokenizer` (slow,
// legacy) for the dummy prefix and byte-fallback pieces.
#include "io/spm_tokenizer.h"

#include <cctype>

#include "core/errors.h"
#include "io/spm_backend.h"

namespace vispco::io {

SpmTokenizerModel::SpmTokenizerModel(const std::string& proto, const std::string& source) {
  std::shared_ptr<detail::SpmProcessor> sp(detail::spm_shim().new_processor());
  if (!sp) throw Error("SentencePiece shim could not create a processor (out of memory?)");
  std::string error;
  if (!sp->load(proto, &error))
    throw FormatError(source + " is not a SentencePiece model (tokenizer.model): " + error);
  sp_ = std::move(sp);
}

std::vector<int64_t> SpmTokenizerModel::encode(const std::string& text) const {
  std::vector<int> ids;
  std::string error;
  if (!sp_->encode(text, &ids, &error)) throw Error("SentencePiece failed to encode text: " + error);
  return {ids.begin(), ids.end()};
}

std::string SpmTokenizerModel::decode(const std::vector<int64_t>& ids, bool after_added) const {
  const std::vector<int> run(ids.begin(), ids.end());
  std::string text, error;
  if (!sp_->decode(run, &text, &error)) throw Error("SentencePiece failed to decode ids: " + error);
  // SentencePiece drops a run's leading "▁" as the text's dummy prefix; after an added token it is a space.
  if (after_added && !run.empty() && sp_->id_to_piece(run.front()).rfind("\xe2\x96\x81", 0) == 0)
    return ' ' + text;
  return text;
}

int64_t SpmTokenizerModel::bos_id() const { return sp_->bos_id(); }
int64_t SpmTokenizerModel::eos_id() const { return sp_->eos_id(); }
int64_t SpmTokenizerModel::pad_id() const { return sp_->pad_id(); }
int64_t SpmTokenizerModel::vocab_size() const { return sp_->piece_size(); }
std::string SpmTokenizerModel::piece(int64_t id) const { return sp_->id_to_piece(static_cast<int>(id)); }
float SpmTokenizerModel::score(int64_t id) const { return sp_->score(static_cast<int>(id)); }
SpmPieceType SpmTokenizerModel::type(int64_t id) const {
  return static_cast<SpmPieceType>(sp_->piece_type(static_cast<int>(id)));
}

std::string SpmTokenizerModel::piece_bytes(int64_t id) const {
  const std::string p = piece(id);
  if (id == bos_id() || id == eos_id() || id == pad_id()) return "";
  if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' &&
      std::isxdigit(static_cast<unsigned char>(p[3])) && std::isxdigit(static_cast<unsigned char>(p[4])))
    return std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
  std::string out;
  static const std::string kSpace = "\xe2\x96\x81";  // U+2581 "▁", SentencePiece's whitespace mark
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += p[i++];
    }
  }
  return out;
}

}  // namespace vispco::io
