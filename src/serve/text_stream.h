// Turns a growing list of generated tokens into the text a client may already see: stop sequences end the
// answer at their first occurrence (OpenAI: the stop text itself is not returned), text that could still
// become a stop sequence or an incomplete UTF-8 character is held back, and the answer is whitespace-trimmed
// as `vispco generate` prints it — so streamed deltas concatenate to exactly the non-streamed content.
// Byte-fallback pieces of an unfinished character decode as U+FFFD; a trailing one is held back as well.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace vispco::serve {

/// Incremental answer text with stop sequences.
class TextStream {
 public:
  /// @param decode token ids → text (io::Tokenizer::decode) @param stop stop sequences (non-empty strings)
  TextStream(std::function<std::string(const std::vector<int64_t>&)> decode, std::vector<std::string> stop);
  /// Adds one generated token. @return false once a stop sequence has appeared (generation should end).
  bool push(int64_t token);
  /// The text not yet handed out that is final now ("" when nothing new is safe).
  std::string take_delta();
  /// Ends the stream: the rest of the final text. @return the remaining delta.
  std::string finish();
  /// The whole answer so far (trimmed; cut at a stop sequence once one appeared).
  std::string text() const;
  bool stopped() const { return stopped_; }

 private:
  std::string visible(bool final) const;   // the prefix a client may see
  std::string emit(const std::string& v);  // the part of v past what was sent, if v extends it
  std::function<std::string(const std::vector<int64_t>&)> decode_;
  std::vector<std::string> stop_;
  std::vector<int64_t> tokens_;
  std::string raw_;      // decoded tokens, leading whitespace removed
  std::string emitted_;  // the text already handed out
  bool stopped_ = false;
  size_t stop_at_ = std::string::npos;
};

}  // namespace vispco::serve
