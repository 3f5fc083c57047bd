// Byte-level BPE (see bpe_model.h). Reference: Hugging Face tokenizers 0.21 models/bpe/{model.rs,word.rs}
// (merge the lowest-ranked adjacent pair, leftmost first, until none applies), openai/gpt-2 encoder.py.
#include "io/bpe_model.h"

#include <array>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/utf8.h"

namespace vispco::io {

namespace {

// The 256 byte → code point pairs of GPT-2's bytes_to_unicode.
const std::array<char32_t, 256>& byte_table() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// Code point → byte, the inverse of byte_table(); −1 for code points outside it.
int unicode_to_byte(char32_t cp) {
  static const std::unordered_map<char32_t, int> inverse = [] {
    std::unordered_map<char32_t, int> m;
    for (int b = 0; b < 256; ++b) m[byte_table()[b]] = b;
    return m;
  }();
  const auto it = inverse.find(cp);
  return it == inverse.end() ? -1 : it->second;
}

// Decodes one code point of valid UTF-8 at s[i], advancing i.
char32_t next_code_point(const std::string& s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
}

// True when the "normalizer" spec is NFC (alone or inside a Sequence), false when null.
bool parse_normalizer(const nlohmann::json& n, const std::string& where) {
  if (n.is_null()) return false;
  const std::string type = n.is_object() ? n.value("type", std::string()) : std::string();
  if (type == "NFC") return true;
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    bool nfc = false;
    for (const auto& e : n["normalizers"]) nfc = parse_normalizer(e, where) || nfc;
    return nfc;
  }
  throw FormatError(where + ": normalizer " + n.dump() + " is not supported (supported: null, NFC)");
}

}  // namespace

char32_t byte_to_unicode(unsigned char b) { return byte_table()[b]; }

ByteLevelBpeModel::ByteLevelBpeModel(const nlohmann::json& tj, SpecialIds specials, const std::string& where)
    : pre_(tj.is_object() ? tj.value("pre_tokenizer", nlohmann::json()) : nlohmann::json(),
           where + ": pre_tokenizer"),
      specials_(specials) {
  if (!tj.is_object()) throw FormatError(where + " is not a JSON object");
  nfc_ = parse_normalizer(tj.value("normalizer", nlohmann::json()), where);
  const auto& dec = tj.value("decoder", nlohmann::json());
  if (!dec.is_null() && !(dec.is_object() && dec.value("type", std::string()) == "ByteLevel"))
    throw FormatError(where + ": decoder " + dec.dump() + " is not supported (supported: ByteLevel, null)");
  if (!tj.contains("model") || !tj["model"].is_object()) throw FormatError(where + ": no \"model\" object");
  const auto& m = tj["model"];
  if (m.value("type", std::string("BPE")) != "BPE")
    throw FormatError(where + ": model type '" + m.value("type", std::string()) +
                      "' is not supported (supported: BPE)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && m[k] != "")
      throw FormatError(where + ": model." + k + " is not supported by byte-level BPE");
  if (m.value("byte_fallback", false)) throw FormatError(where + ": model.byte_fallback is not supported");
  ignore_merges_ = m.value("ignore_merges", false);

  if (!m.contains("vocab") || !m["vocab"].is_object())
    throw FormatError(where + ": model.vocab must be an object");
  const auto& vocab = m["vocab"];
  pieces_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [piece, idj] : vocab.items()) {
    const int64_t id = idj.is_number_integer() ? idj.get<int64_t>() : -1;
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()) || seen[id])
      throw FormatError(where + ": model.vocab's ids must be 0.." + std::to_string(vocab.size() - 1) +
                        ", each once (piece '" + piece + "' has " + idj.dump() + ")");
    seen[id] = true;
    pieces_[id] = piece;
    ids_.emplace(piece, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, byte_table()[b]);
    const int64_t id = id_of(ch);
    if (id < 0)
      throw FormatError(where + ": the vocabulary lacks the byte-level character of byte " +
                        std::to_string(b) + " ('" + ch + "'); is this a byte-level BPE tokenizer?");
    byte_id_[b] = static_cast<int32_t>(id);
  }

  const auto& merges = m.value("merges", nlohmann::json::array());
  if (!merges.is_array()) throw FormatError(where + ": model.merges must be an array");
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        throw FormatError(where + ": merge " + std::to_string(r) + " '" + s + "' is not two pieces");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0], b = e[1];
    } else {
      throw FormatError(where + ": merge " + std::to_string(r) + " is " + e.dump() +
                        ", not \"a b\" or [a, b]");
    }
    const int64_t ia = id_of(a), ib = id_of(b), im = id_of(a + b);
    if (ia < 0 || ib < 0 || im < 0)
      throw FormatError(where + ": merge " + std::to_string(r) + " ('" + a + "' '" + b +
                        "') names a piece missing from model.vocab");
    merges_.emplace(pair_key(static_cast<int32_t>(ia), static_cast<int32_t>(ib)),
                    Merge{static_cast<int32_t>(r), static_cast<int32_t>(im)});  // the first rank wins
  }
}

int64_t ByteLevelBpeModel::id_of(const std::string& piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

void ByteLevelBpeModel::encode_piece(const std::string& bytes, std::vector<int64_t>& out) const {
  if (ignore_merges_) {  // a piece that is itself in the vocabulary is one token (Llama-3)
    std::string mapped;
    for (const unsigned char c : bytes) append_utf8(mapped, byte_table()[c]);
    if (const int64_t id = id_of(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t> sym;
  sym.reserve(bytes.size());
  for (const unsigned char c : bytes) sym.push_back(byte_id_[c]);
  while (sym.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), merged = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const auto it = merges_.find(pair_key(sym[i], sym[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank)
        best_rank = it->second.rank, merged = it->second.merged, best_at = i;
    }
    if (merged < 0) break;
    // Merge every occurrence of the best pair, left to right (what the rank queue does for equal ranks).
    const int32_t left = sym[best_at], right = sym[best_at + 1];
    std::vector<int32_t> next;
    next.reserve(sym.size());
    for (size_t i = 0; i < sym.size();) {
      if (i >= best_at && i + 1 < sym.size() && sym[i] == left && sym[i + 1] == right) {
        next.push_back(merged);
        i += 2;
      } else {
        next.push_back(sym[i++]);
      }
    }
    sym.swap(next);
  }
  out.insert(out.end(), sym.begin(), sym.end());
}

std::vector<int64_t> ByteLevelBpeModel::encode(const std::string& text) const {
  std::vector<int64_t> out;
  for (const auto& piece : pre_.split(nfc_ ? utf8_nfc(text) : text)) encode_piece(piece, out);
  return out;
}

const std::string& ByteLevelBpeModel::checked_piece(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                          std::to_string(vocab_size()) + ")");
  return pieces_[static_cast<size_t>(id)];
}

std::string ByteLevelBpeModel::piece(int64_t id) const { return checked_piece(id); }

std::string ByteLevelBpeModel::piece_bytes(int64_t id) const {
  const std::string& p = checked_piece(id);
  std::string out;
  for (size_t i = 0; i < p.size();) {
    const size_t start = i;
    const char32_t cp = next_code_point(p, i);
    const int b = unicode_to_byte(cp);
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(p, start, i - start);  // not a byte character: its own UTF-8 (as tokenizers' decoder)
  }
  return out;
}

std::string ByteLevelBpeModel::decode(const std::vector<int64_t>& ids, bool /*after_added*/) const {
  std::string bytes;
  for (const int64_t id : ids) bytes += piece_bytes(id);
  return utf8_lossy(bytes);
}

}  // namespace vispco::io
