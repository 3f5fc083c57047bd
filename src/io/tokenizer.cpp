// Tokenizer over any TokenizerModel (added tokens matched whole above it), and training of small Llama-style
// SentencePiece BPE models. Reference: HF `LlamaTokenizer` (slow, legacy) and LLaVA `llava/mm_utils.py`
// tokenizer_image_token (segments between added tokens encoded one by one).
#include "io/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "core/errors.h"
#include "io/spm_backend.h"
#include "io/spm_tokenizer.h"

namespace vispco::io {

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerModel> model) : model_(std::move(model)) {
  if (!model_) throw InvalidArgument("Tokenizer: no tokenizer model");
}

const TokenizerModel& Tokenizer::model() const {
  if (!model_) throw InvalidArgument("Tokenizer is empty; create it with Tokenizer::load or from_serialized");
  return *model_;
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw IoError("tokenizer file not found (or not a file): '" + path + "'");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open tokenizer file for reading: '" + path + "'");
  const std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("error while reading tokenizer file: '" + path + "'");
  return Tokenizer(std::make_shared<SpmTokenizerModel>(proto, "'" + path + "'"));
}

Tokenizer Tokenizer::from_serialized(const std::string& proto) {
  return Tokenizer(std::make_shared<SpmTokenizerModel>(
      proto, "serialized model (" + std::to_string(proto.size()) + " bytes)"));
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool add_bos) const {
  const TokenizerModel& m = model();
  std::vector<int64_t> out;
  if (add_bos && m.bos_id() >= 0) out.push_back(m.bos_id());
  size_t begin = 0;  // start of the text segment not yet encoded
  const auto flush = [&](size_t end) {
    if (end > begin)
      for (int64_t id : m.encode(text.substr(begin, end - begin))) out.push_back(id);
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
  const TokenizerModel& m = model();
  const int64_t n = m.vocab_size();
  std::string text;
  std::vector<int64_t> run;  // model ids since the last added token
  bool after_added = false;  // the run follows a non-special added token
  const auto flush = [&] {
    if (!run.empty()) text += m.decode(run, after_added);
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
    if (id < 0 || id >= n || id == m.bos_id() || id == m.eos_id() || id == m.pad_id()) continue;
    run.push_back(id);
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
  const TokenizerModel& m = model();
  if (id < 0 || id >= m.vocab_size())
    throw InvalidArgument("token id " + std::to_string(id) + " is outside the tokenizer's [0, " +
                          std::to_string(m.vocab_size()) + ")");
  return m.piece(id);
}

const SpmTokenizerModel& Tokenizer::sentencepiece() const {
  const auto* spm = dynamic_cast<const SpmTokenizerModel*>(&model());
  if (spm == nullptr)
    throw InvalidArgument("this tokenizer is " + model().format() + ", not SentencePiece (tokenizer.model)");
  return *spm;
}

float Tokenizer::piece_score(int64_t id) const {
  piece(id);  // range check
  return sentencepiece().score(id);
}

SpmPieceType Tokenizer::piece_type(int64_t id) const {
  piece(id);  // range check
  return sentencepiece().type(id);
}

std::string Tokenizer::piece_bytes(int64_t id) const {
  piece(id);  // range check
  return model().piece_bytes(id);
}

int64_t Tokenizer::bos_id() const { return model().bos_id(); }
int64_t Tokenizer::eos_id() const { return model().eos_id(); }
int64_t Tokenizer::pad_id() const { return model().pad_id(); }
int64_t Tokenizer::vocab_size() const { return model().vocab_size(); }

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
