// The LLaVA-1.5 conversation template; see llava_prompt.h.
#include "model/llava/llava_prompt.h"

#include <string>

#include "core/errors.h"
#include "model/chat_templates.h"

namespace vispco {

namespace {

void check_image_token(const io::Tokenizer& tok, int64_t image_token_index) {
  if (image_token_index >= 0 && image_token_index < tok.vocab_size() && !tok.added_token(image_token_index))
    throw InvalidArgument("llava_prompt_ids: image_token_index " + std::to_string(image_token_index) +
                          " is a text piece of the tokenizer (vocab_size " +
                          std::to_string(tok.vocab_size()) +
                          "); expected an id >= vocab_size (HF: 32000), < 0 (LLaVA: -200), or an added token "
                          "declared in tokenizer_config.json's added_tokens_decoder");
}

// Refuses text holding a special added token's content ("<s>", "</s>", "<unk>", "<image>", …) or the image
// token's: the tokenizer matches them whole, so such text would become a control id — an EOS and a turn the
// client forged. One line naming the message and the token.
void check_no_special_text(const io::Tokenizer& tok, int64_t image_token_index, const std::string& text,
                           const std::string& where) {
  for (const io::AddedToken& t : tok.added_tokens())
    if ((t.special || t.id == image_token_index) && text.find(t.content) != std::string::npos)
      throw InvalidArgument(where + " holds the special token " + quoted_for_error(t.content) +
                            "; a LLaVA prompt cannot take it as text");
}

}  // namespace

std::vector<int64_t> llava_prompt_ids(const io::Tokenizer& tok, const std::string& question,
                                      int64_t image_token_index) {
  check_image_token(tok, image_token_index);
  // Each text segment around <image> gets its own dummy prefix, as LLaVA's tokenizer_image_token and HF's
  // legacy Llama tokenizers do: "USER: " -> ▁US ER : ▁ ; "\n..." -> ▁ <0x0A> ...
  std::vector<int64_t> ids = tok.encode("USER: ", /*add_bos=*/true);
  ids.push_back(image_token_index);
  const std::vector<int64_t> tail = tok.encode("\n" + question + " ASSISTANT:", /*add_bos=*/false);
  ids.insert(ids.end(), tail.begin(), tail.end());
  return ids;
}

std::vector<int64_t> llava_followup_ids(const io::Tokenizer& tok, const std::string& question) {
  return tok.encode("USER: " + question + " ASSISTANT:", /*add_bos=*/false);
}

std::vector<int64_t> llava_conversation_ids(const io::Tokenizer& tok,
                                            const std::vector<ChatMessage>& messages,
                                            int64_t image_token_index) {
  check_image_token(tok, image_token_index);
  std::vector<int64_t> ids;
  std::string pending;  // the system text and its separator, put before the next "USER: "
  const auto emit = [&](const std::string& text) {
    const auto t = tok.encode(text, /*add_bos=*/ids.empty());
    ids.insert(ids.end(), t.begin(), t.end());
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string text = message_text(m);
    check_no_special_text(tok, image_token_index, text,
                          "message " + std::to_string(i) + " (" + quoted_for_error(m.role) + ")");
    if (m.role == "system") {
      pending = text.empty() ? std::string() : text + " ";
    } else if (m.role == "user") {
      if (message_images(m) > 0) {
        emit(pending + "USER: ");
        ids.push_back(image_token_index);
        emit("\n" + text + " ASSISTANT:");
      } else {
        emit(pending + "USER: " + text + " ASSISTANT:");
      }
      pending.clear();
    } else if (m.role == "assistant") {
      emit(text);
      ids.push_back(tok.eos_id());
    } else {
      throw InvalidArgument("message " + std::to_string(i) + ": LLaVA-1.5's template has no role " +
                            quoted_for_error(m.role) + " (valid: system, user, assistant)");
    }
  }
  return ids;
}

}  // namespace vispco
