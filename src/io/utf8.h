// UTF-8 helpers of the byte-level BPE tokenizer: Unicode NFC (tokenizer.json's "normalizer": {"type": "NFC"},
// through utf8proc) and Rust's String::from_utf8_lossy, which Hugging Face tokenizers applies to decoded
// bytes.
#pragma once
#include <string>

namespace vispco::io {

/// `text` in Unicode Normalization Form C (UAX #15), e.g. "e" + U+0301 → "é" (U+00E9).
/// @throws InvalidArgument when `text` is not valid UTF-8.
std::string utf8_nfc(const std::string& text);

/// True when `text` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
bool utf8_valid(const std::string& text);

/// `bytes` with each maximal invalid subsequence replaced by U+FFFD, as Rust's String::from_utf8_lossy
/// (Unicode §3.9 "U+FFFD substitution of maximal subparts"): "a\xF0\x9F\x98b" → "a\uFFFDb".
std::string utf8_lossy(const std::string& bytes);

/// Appends code point `cp` (≤ U+10FFFF, not a surrogate) to `out` as UTF-8.
void append_utf8(std::string& out, char32_t cp);

}  // namespace vispco::io
