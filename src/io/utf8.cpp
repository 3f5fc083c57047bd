// UTF-8 helpers (see utf8.h). Reference: Unicode 15 §3.9 (well-formed UTF-8, Table 3-7; maximal subparts);
// utf8proc's utf8proc_NFC for normalisation.
#include "io/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/errors.h"

namespace vispco::io {

namespace {

// Length of the longest prefix of s[i..] that is a well-formed sequence or a maximal subpart of one (≥ 1),
// and whether it is complete (Unicode Table 3-7: the second byte's range depends on the first).
size_t sequence_at(const std::string& s, size_t i, bool& complete) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  complete = false;
  if (c < 0x80) {
    complete = true;
    return 1;
  }
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;  // 0x80–0xC1, 0xF5–0xFF never start a sequence
  }
  size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    const unsigned char x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) return k;
  }
  complete = k == need + 1;
  return k;
}

}  // namespace

bool utf8_valid(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    bool complete = false;
    i += sequence_at(text, i, complete);
    if (!complete) return false;
  }
  return true;
}

std::string utf8_lossy(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    bool complete = false;
    const size_t n = sequence_at(bytes, i, complete);
    if (complete)
      out.append(bytes, i, n);
    else
      out += "\xEF\xBF\xBD";
    i += n;
  }
  return out;
}

std::string utf8_nfc(const std::string& text) {
  if (!utf8_valid(text)) throw InvalidArgument("text is not valid UTF-8; the tokenizer reads UTF-8 only");
  // utf8proc_NFC reads a NUL-terminated string, so a text holding NUL is normalised piece by piece.
  std::string out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\0', begin), text.size());
    const std::string piece = text.substr(begin, end - begin);
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> nfc(
        utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(piece.c_str())), &std::free);
    if (!nfc) throw Error("utf8proc could not normalise the text to NFC (out of memory?)");
    out += reinterpret_cast<const char*>(nfc.get());
    if (end == text.size()) break;
    out += '\0';
    begin = end + 1;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace vispco::io
