// One message of a chat conversation as clients send it (OpenAI's chat completions `messages`,
// transformers' apply_chat_template input): a role and its content parts. Shared by the families' chat
// templates (model/chat_templates.h, model/qwen2_vl/chat_template.h) and the server's request parser.
#pragma once
#include <string>
#include <vector>

namespace vispco {

/// One part of a message's content: text, or an image (rendered as the template's placeholder).
struct ChatPart {
  bool image = false;  ///< true: an image (its bytes travel apart, e.g. VlmRequest::pixels); false: `text`
  std::string text;    ///< the text of a text part
};

/// One chat message, as a client sends it (OpenAI / transformers' messages).
struct ChatMessage {
  std::string role;  ///< "system", "user", "assistant", …
  /// Content as a list of parts, in the client's order; with `plain` the content was one string,
  /// parts[0].text.
  std::vector<ChatPart> parts;
  bool plain = false;  ///< content given as a string (a template renders it without the part loop)
};

/// The message's text parts joined by "\n" (images left out; a "\n" only after non-empty text), as the
/// server has always joined a turn's text.
inline std::string message_text(const ChatMessage& m) {
  std::string out;
  for (const auto& p : m.parts) {
    if (p.image) continue;
    if (!out.empty()) out += "\n";
    out += p.text;
  }
  return out;
}

/// Number of image parts of the message.
inline int message_images(const ChatMessage& m) {
  int n = 0;
  for (const auto& p : m.parts) n += p.image;
  return n;
}

}  // namespace vispco
