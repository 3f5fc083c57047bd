// Qwen2-VL's ChatML template (see chat_template.h). Reference: the chat_template string of
// Qwen/Qwen2-VL-7B-Instruct's tokenizer_config.json (tests/reference/qwen_tokenizer/tokenizer_config.json),
// whose rendering by @huggingface/jinja the tests compare with.
#include "model/qwen2_vl/chat_template.h"

#include <algorithm>

#include "core/errors.h"
#include "model/chat_templates.h"

namespace vispco {

namespace {

constexpr const char* kImageSpan = "<|vision_start|><|image_pad|><|vision_end|>";
// The template's own special tokens, which the tokenizer must hold as added tokens.
constexpr const char* kTemplateTokens[] = {"<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                                           "<|image_pad|>"};
// Every Qwen2-VL control token: none may come from a client's text.
constexpr const char* kControlTokens[] = {"<|im_start|>",   "<|im_end|>",    "<|vision_start|>",
                                          "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
                                          "<|vision_pad|>", "<|endoftext|>"};

}  // namespace

std::string render_qwen2_vl_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 bool add_vision_id) {
  std::string out;
  int images = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role != "system") out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    out += "<|im_start|>" + m.role + "\n";
    if (m.plain) {
      out += m.parts.empty() ? std::string() : m.parts[0].text;
    } else {
      for (const ChatPart& p : m.parts) {
        if (p.image) {
          ++images;
          if (add_vision_id) out += "Picture " + std::to_string(images) + ": ";
          out += kImageSpan;
        } else {
          out += p.text;
        }
      }
    }
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::vector<int64_t> qwen2_vl_prompt_ids(const io::Tokenizer& tok, const std::string& question,
                                         int64_t image_token_id) {
  return qwen2_vl_conversation_ids(tok, {{"user", {{true, ""}, {false, question}}, false}}, image_token_id);
}

std::vector<int64_t> qwen2_vl_conversation_ids(const io::Tokenizer& tok,
                                               const std::vector<ChatMessage>& messages,
                                               int64_t image_token_id) {
  const auto& added = tok.added_tokens();
  for (const char* s : kTemplateTokens)
    if (std::none_of(added.begin(), added.end(), [&](const io::AddedToken& t) { return t.content == s; }))
      throw InvalidArgument(std::string("the tokenizer has no added token '") + s +
                            "', which Qwen2-VL's chat template needs");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    for (const ChatPart& p : m.parts)
      for (const char* s : kControlTokens)
        if (!p.image && p.text.find(s) != std::string::npos)
          throw InvalidArgument(
              (messages.size() == 1
                   ? std::string("the question")
                   : "message " + std::to_string(i) + " (" + quoted_for_error(m.role) + ")") +
              " holds the control token '" + s + "'; a Qwen2-VL prompt cannot take it as text");
    if (m.role.find("<|") != std::string::npos || m.role.find('\n') != std::string::npos)
      throw InvalidArgument("message " + std::to_string(i) + " (" + quoted_for_error(m.role) +
                            "): a Qwen2-VL message role may not hold a control token or a newline");
  }
  const auto ids =
      tok.encode(render_qwen2_vl_chat(messages, /*add_generation_prompt=*/true), /*add_bos=*/false);
  if (std::count(ids.begin(), ids.end(), image_token_id) != 1)
    throw InvalidArgument("the tokenizer's <|image_pad|> is not the config's image_token_id " +
                          std::to_string(image_token_id));
  return ids;
}

}  // namespace vispco
