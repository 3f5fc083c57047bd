// SentencePiece tokenizer wrapper, training of small Llama-style BPE models, and the LLaVA-1.5 prompt.
// Reference: HF `LlamaTokenizer` (slow, legacy) and LLaVA `llava/mm_utils.py` tokenizer_image_token.
#include "io/tokenizer.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "core/errors.h"
#include "io/spm_backend.h"

namespace vispco::io {
namespace {

using detail::SpmProcessor;

/// Parses a serialized ModelProto; `source` names it in errors. @throws FormatError.
std::shared_ptr<const SpmProcessor> load_processor(const std::string& proto, const std::string& source) {
  std::shared_ptr<SpmProcessor> sp(detail::spm_shim().new_processor());
  if (!sp) throw Error("SentencePiece shim could not create a processor (out of memory?)");
  std::string error;
  if (!sp->load(proto, &error))
    throw FormatError(source + " is not a SentencePiece model (tokenizer.model): " + error);
  return sp;
}

const SpmProcessor& checked(const std::shared_ptr<const SpmProcessor>& sp) {
  if (!sp) throw InvalidArgument("Tokenizer is empty; create it with Tokenizer::load or from_serialized");
  return *sp;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw IoError("tokenizer file not found (or not a file): '" + path + "'");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open tokenizer file for reading: '" + path + "'");
  const std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("error while reading tokenizer file: '" + path + "'");
  Tokenizer tok;
  tok.sp_ = load_processor(proto, "'" + path + "'");
  return tok;
}

Tokenizer Tokenizer::from_serialized(const std::string& proto) {
  Tokenizer tok;
  tok.sp_ = load_processor(proto, "serialized model (" + std::to_string(proto.size()) + " bytes)");
  return tok;
}

namespace {

std::vector<int> spm_encode(const SpmProcessor& sp, const std::string& text) {
  std::vector<int> ids;
  std::string error;
  if (!sp.encode(text, &ids, &error)) throw Error("SentencePiece failed to encode text: " + error);
  return ids;
}

}  // namespace

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool add_bos) const {
  const SpmProcessor& sp = checked(sp_);
  std::vector<int64_t> out;
  if (add_bos) out.push_back(sp.bos_id());
  size_t begin = 0;  // start of the text segment not yet encoded
  const auto flush = [&](size_t end) {
    if (end > begin)
      for (int id : spm_encode(sp, text.substr(begin, end - begin))) out.push_back(id);
  };
  for (size_t i = 0; i < text.size() && !added_.empty();) {
    const AddedToken* hit = nullptr;  // the longest added token starting at i
    for (const auto& t : added_)
      if (text.compare(i, t.content.size(), t.content) == 0 &&
          (!hit || t.content.size() > hit->content.size()))
        hit = &t;
    if (!hit) {
      ++i;
      continue;
    }
    flush(i);
    out.push_back(hit->id);
    i += hit->content.size();
    begin = i;
  }
  flush(text.size());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const SpmProcessor& sp = checked(sp_);
  const int64_t n = sp.piece_size();
  std::string text;
  std::vector<int> run;      // SentencePiece ids since the last added token
  bool after_added = false;  // the run follows a non-special added token
  const auto flush = [&] {
    std::string part, error;
    if (!sp.decode(run, &part, &error)) throw Error("SentencePiece failed to decode ids: " + error);
    // SentencePiece drops a run's leading "▁" as the text's dummy prefix; after an added token it is a space.
    if (after_added && !run.empty() && sp.id_to_piece(run.front()).rfind("\xe2\x96\x81", 0) == 0) text += ' ';
    text += part;
    run.clear();
  };
  for (const int64_t id : ids) {
    if (const AddedToken* t = added_token(id)) {
      if (t->special) continue;
      flush();
      text += t->content;
      after_added = true;
      continue;
    }
    if (id < 0 || id >= n || id == sp.bos_id() || id == sp.eos_id() || id == sp.pad_id()) continue;
    run.push_back(static_cast<int>(id));
  }
  flush();
  return text;
}

void Tokenizer::set_added_tokens(std::vector<AddedToken> tokens) {
  for (const auto& t : tokens)
    if (t.id < 0 || t.content.empty())
      throw InvalidArgument("added token " + std::to_string(t.id) + " '" + t.content +
                            "': ids must be ≥ 0 and contents non-empty");
  added_ = std::move(tokens);
}

const AddedToken* Tokenizer::added_token(int64_t id) const {
  for (const auto& t : added_)
    if (t.id == id) return &t;
  return nullptr;
}

std::string Tokenizer::piece(int64_t id) const {
  const SpmProcessor& sp = checked(sp_);
  if (id < 0 || id >= sp.piece_size())
    throw InvalidArgument("token id " + std::to_string(id) + " is outside the tokenizer's [0, " +
                          std::to_string(sp.piece_size()) + ")");
  return sp.id_to_piece(static_cast<int>(id));
}

float Tokenizer::piece_score(int64_t id) const {
  piece(id);  // range check
  return checked(sp_).score(static_cast<int>(id));
}

SpmPieceType Tokenizer::piece_type(int64_t id) const {
  piece(id);  // range check
  return static_cast<SpmPieceType>(checked(sp_).piece_type(static_cast<int>(id)));
}

std::string Tokenizer::piece_bytes(int64_t id) const {
  const std::string p = piece(id);
  const SpmProcessor& sp = checked(sp_);
  if (id == sp.bos_id() || id == sp.eos_id() || id == sp.pad_id()) return "";
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

int64_t Tokenizer::bos_id() const { return checked(sp_).bos_id(); }
int64_t Tokenizer::eos_id() const { return checked(sp_).eos_id(); }
int64_t Tokenizer::pad_id() const { return checked(sp_).pad_id(); }
int64_t Tokenizer::vocab_size() const { return checked(sp_).piece_size(); }

void train_sentencepiece(const std::vector<std::string>& sentences, int vocab_size,
                         const std::string& out_path, const std::vector<std::string>& user_defined_symbols) {
  if (sentences.empty()) throw InvalidArgument("train_sentencepiece: no training sentences");
  if (vocab_size < 1)
    throw InvalidArgument("train_sentencepiece: vocab_size must be >= 1, got " + std::to_string(vocab_size));
  // Llama's tokenizer.model settings (identity normalizer, dummy prefix, whitespace kept, digits split,
  // byte fallback) so the prompt code behaves as with real checkpoints.
  std::vector<std::pair<std::string, std::string>> kwargs{
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"hard_vocab_limit", "false"},  // a vocab larger than the corpus supports gives fewer pieces
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"split_digits", "true"},
      {"byte_fallback", "true"},  // needs vocab_size >= 259 + distinct characters of the corpus
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "true"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"num_threads", "1"},  // deterministic
      {"minloglevel", "2"},  // silence training logs (sets the shim's SentencePiece-wide level)
  };
  if (!user_defined_symbols.empty()) {
    std::string list;
    for (const auto& u : user_defined_symbols) {
      if (u.empty() || u.find(',') != std::string::npos)
        throw InvalidArgument("train_sentencepiece: user-defined symbol '" + u +
                              "' must be non-empty without ','");
      list += (list.empty() ? "" : ",") + u;
    }
    kwargs.emplace_back("user_defined_symbols", list);
  }
  std::string proto, error;
  if (!detail::spm_shim().train(&sentences, &kwargs, &proto, &error))
    throw Error("SentencePiece training failed (vocab_size " + std::to_string(vocab_size) + ", " +
                std::to_string(sentences.size()) + " sentences): " + error);
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError("cannot open tokenizer output for writing: '" + out_path + "'");
  out.write(proto.data(), static_cast<std::streamsize>(proto.size()));
  out.close();
  if (!out) throw IoError("error while writing tokenizer model: '" + out_path + "'");
}

}  // namespace vispco::io
