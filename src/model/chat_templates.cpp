// The chat-template table and the shared conversation rules (see chat_templates.h).
#include "model/chat_templates.h"

#include <algorithm>
#include <cstdio>

#include "core/errors.h"
#include "model/llava/llava_prompt.h"
#include "model/qwen2_vl/chat_template.h"

namespace vispco {

std::string quoted_for_error(const std::string& s, size_t max_bytes) {
  size_t n = std::min(s.size(), max_bytes);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // a whole char
  std::string out = "'";
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "…";
  return out + "'";
}

const std::vector<ChatTemplate>& chat_templates() {
  static const std::vector<ChatTemplate> table = {
      {"vicuna_v1",
       {"LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration"},
       [](const io::Tokenizer& tok, const std::vector<ChatMessage>& ms, int64_t image) {
         return llava_conversation_ids(tok, ms, image);
       }},
      {"chatml",
       {"Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"},
       [](const io::Tokenizer& tok, const std::vector<ChatMessage>& ms, int64_t image) {
         return qwen2_vl_conversation_ids(tok, ms, image);
       }},
  };
  return table;
}

const ChatTemplate* find_chat_template(const std::string& architecture) {
  for (const auto& t : chat_templates())
    for (const auto& a : t.architectures)
      if (a == architecture) return &t;
  return nullptr;
}

void check_conversation(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw InvalidArgument("a conversation needs at least one user message");
  int images = 0;
  size_t first_turn = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "message " + std::to_string(i) + " (" + quoted_for_error(m.role) + ")";
    if (m.role == "system") {
      if (i != 0) throw InvalidArgument(where + ": a system message may only come first");
      if (message_images(m) > 0) throw InvalidArgument(where + ": an image in a system message");
      first_turn = 1;
      continue;
    }
    if (m.role != "user" && m.role != "assistant")
      throw InvalidArgument(where + ": unknown role (valid: system, user, assistant)");
    const char* expected = (i - first_turn) % 2 == 0 ? "user" : "assistant";
    if (m.role != expected)
      throw InvalidArgument(where +
                            ": turns must alternate user, assistant, user, … starting with a user turn; " +
                            "expected '" + expected + "' here");
    if (m.role == "assistant" && message_images(m) > 0)
      throw InvalidArgument(where + ": an image in an assistant turn (the image goes in a user turn)");
    images += message_images(m);
  }
  if (messages.back().role != "user")
    throw InvalidArgument("message " + std::to_string(messages.size() - 1) +
                          ": the last message must be a user turn (the question to answer), got " +
                          quoted_for_error(messages.back().role));
  if (images != 1)
    throw InvalidArgument(
        "a conversation takes exactly one image, in a user turn ({\"type\": \"image_url\", "
        "\"image_url\": {\"url\": \"data:image/png;base64,...\"}}); got " +
        std::to_string(images));
}

std::vector<ChatMessage> normalize_conversation(const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> out;
  for (const ChatMessage& m : messages) {
    ChatMessage n;
    n.role = m.role;
    if (message_images(m) > 0) {
      n.parts = {{true, ""}, {false, message_text(m)}};
    } else {
      n.parts = {{false, message_text(m)}};
      n.plain = true;
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::string current_question(const std::vector<ChatMessage>& messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it)
    if (it->role == "user") return message_text(*it);
  return "";
}

std::vector<int64_t> conversation_prompt_ids(const VisionLanguageModel& m,
                                             const std::vector<ChatMessage>& messages) {
  check_conversation(messages);
  const ChatTemplate* t = find_chat_template(m.shape().architecture);
  if (t != nullptr)
    return t->prompt_ids(m.tokenizer(), normalize_conversation(messages), m.shape().image_token_id);
  if (messages.size() == 1) return m.prompt_ids(message_text(messages[0]));
  std::string known;
  for (const auto& row : chat_templates())
    for (const auto& a : row.architectures) known += (known.empty() ? "" : ", ") + a;
  throw InvalidArgument("the architecture " + m.shape().architecture +
                        " has no multi-turn chat template (templates exist for " + known +
                        "); send one user message");
}

}  // namespace vispco
