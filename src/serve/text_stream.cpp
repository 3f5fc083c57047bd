// Incremental answer text with stop sequences (see text_stream.h).
#include "serve/text_stream.h"

#include <algorithm>

namespace vispco::serve {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

// Bytes at the end of s that begin a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

TextStream::TextStream(std::function<std::string(const std::vector<int64_t>&)> decode,
                       std::vector<std::string> stop)
    : decode_(std::move(decode)), stop_(std::move(stop)) {}

bool TextStream::push(int64_t token) {
  if (stopped_) return false;
  tokens_.push_back(token);
  const std::string all = decode_(tokens_);
  const auto a = all.find_first_not_of(" \t\n");
  raw_ = a == std::string::npos ? "" : all.substr(a);
  for (const auto& s : stop_) {
    const auto p = raw_.find(s);
    if (p != std::string::npos && (stop_at_ == std::string::npos || p < stop_at_)) stop_at_ = p;
  }
  stopped_ = stop_at_ != std::string::npos;
  return !stopped_;
}

std::string TextStream::visible(bool final) const {
  std::string t = stopped_ ? raw_.substr(0, stop_at_) : raw_;
  if (!final && !stopped_) {
    // Hold back a suffix that could grow into a stop sequence, and an unfinished UTF-8 character.
    size_t hold = 0;
    for (const auto& s : stop_)
      for (size_t k = std::min(s.size() - 1, t.size()); k > hold; --k)
        if (t.compare(t.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    t.resize(t.size() - hold);
    t.resize(t.size() - incomplete_utf8_tail(t));
    // SentencePiece decodes the bytes of a character not yet complete (byte-fallback pieces) as U+FFFD, which
    // the next token may turn into the real character: hold replacement characters at the end back too.
    static const std::string kReplacement = "\xEF\xBF\xBD";
    while (t.size() >= 3 && t.compare(t.size() - 3, 3, kReplacement) == 0) t.resize(t.size() - 3);
  }
  // Trailing whitespace is final only when text follows it.
  while (!t.empty() && is_space(t.back())) t.pop_back();
  return t;
}

std::string TextStream::emit(const std::string& v) {
  // Only text that extends what was sent: should decoding ever rewrite earlier text, nothing more is sent
  // rather than a delta cut inside a character.
  if (v.size() <= emitted_.size() || v.compare(0, emitted_.size(), emitted_) != 0) return "";
  std::string d = v.substr(emitted_.size());
  emitted_ = v;
  return d;
}

std::string TextStream::take_delta() { return emit(visible(false)); }

std::string TextStream::finish() { return emit(visible(true)); }

std::string TextStream::text() const { return visible(true); }

}  // namespace vispco::serve
