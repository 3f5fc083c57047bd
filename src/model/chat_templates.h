// Multi-turn chat prompts: one chat-template table keyed by the Hugging Face architecture name (as the
// family registry, model/family.h), the conversation rules every template shares (checked once here), and
// the prompt ids of a conversation for a loaded model. Templates: LLaVA-1.5's "vicuna_v1"
// (model/llava/llava_prompt.h; LLaVA and LLaVA-NeXT) and Qwen's ChatML (model/qwen2_vl/chat_template.h;
// Qwen2-VL and Qwen2.5-VL).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/chat_message.h"
#include "model/vlm.h"

namespace vispco {

/// One row of the chat-template table.
struct ChatTemplate {
  std::string name;                        ///< "vicuna_v1", "chatml"
  std::vector<std::string> architectures;  ///< HF `architectures` names it serves
  /// Prompt ids of a checked, normalised conversation (normalize_conversation()) with exactly one image
  /// placeholder `image_token_id`. @throws InvalidArgument (the template's own refusals).
  std::function<std::vector<int64_t>(const io::Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                     int64_t image_token_id)>
      prompt_ids;
};

/// A client's string (a role, a part type) as an error message may quote it: in single quotes, at most
/// `max_bytes` bytes of it (cut on a UTF-8 character boundary, "…" marking the cut), control characters,
/// backslashes and quotes escaped (\n, \t, \\, \', \xNN), so the message stays one line and short.
std::string quoted_for_error(const std::string& s, size_t max_bytes = 40);

/// The table (built once).
const std::vector<ChatTemplate>& chat_templates();

/// The template of an architecture, or nullptr when the table has none.
const ChatTemplate* find_chat_template(const std::string& architecture);

/// Checks the shape every template takes: at least one message; an optional "system" message first (text
/// only); then "user" and "assistant" turns alternating, starting and ending with a user turn; exactly one
/// image in the whole conversation, in a user turn. @throws InvalidArgument, one line naming the message
/// (0-based index) and the rule.
void check_conversation(const std::vector<ChatMessage>& messages);

/// The conversation as templates take it: each message's text parts joined (message_text()); the user turn
/// holding the image as two parts, the image then that text (so one user turn renders as the single-turn
/// templates always did); every other message one plain text part.
std::vector<ChatMessage> normalize_conversation(const std::vector<ChatMessage>& messages);

/// The text of the last user turn (the current question): what keep=auto's predictor reads.
std::string current_question(const std::vector<ChatMessage>& messages);

/// Prompt ids of a conversation for `m`: check_conversation(), then its architecture's template over
/// normalize_conversation(). An architecture without a template (e.g. a test family) takes one user turn
/// only, through m.prompt_ids(its text). @throws InvalidArgument for a conversation check_conversation()
/// refuses, several turns on an architecture without a template, or the template's own refusals.
std::vector<int64_t> conversation_prompt_ids(const VisionLanguageModel& m,
                                             const std::vector<ChatMessage>& messages);

}  // namespace vispco
