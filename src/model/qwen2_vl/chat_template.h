// The Qwen2-VL / Qwen2.5-VL chat template (ChatML with vision placeholders), built in: the Instruct models'
// tokenizer_config.json "chat_template" (Qwen/Qwen2-VL-7B-Instruct, also Qwen2.5-VL's) rendered without a
// Jinja engine. Supported: system / user / assistant (any role name) messages whose content is a string or a
// list of text and image parts, the default system message when the first message is not one,
// add_generation_prompt and add_vision_id ("Picture N: "). Not supported: video parts and tool calls.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/chat_message.h"

namespace vispco {

/// The prompt text of `messages` as the template renders it: "<|im_start|>system\nYou are a helpful
/// assistant.<|im_end|>\n" first unless the first message is a system message, then each message as
/// "<|im_start|>{role}\n{content}<|im_end|>\n", an image part as
/// "<|vision_start|><|image_pad|><|vision_end|>" (preceded by "Picture N: " with add_vision_id), and
/// "<|im_start|>assistant\n" with add_generation_prompt.
std::string render_qwen2_vl_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 bool add_vision_id = false);

/// Prompt ids of one user turn holding one image then `question`, after the default system message, with the
/// generation prompt: render_qwen2_vl_chat tokenized (special tokens matched whole), so it holds
/// `image_token_id` (<|image_pad|>) exactly once — the pipeline expands it to N_v visual tokens.
/// @throws InvalidArgument when the tokenizer lacks the template's special tokens, or `question` itself holds
/// one of them (a second image placeholder or a forged turn).
std::vector<int64_t> qwen2_vl_prompt_ids(const io::Tokenizer& tok, const std::string& question,
                                         int64_t image_token_id);

/// Prompt ids of a whole conversation (render_qwen2_vl_chat with the generation prompt, tokenized): the
/// default system message unless the first message is a system one, each earlier assistant answer closed by
/// "<|im_end|>\n". `messages` are rendered as given (vispco's server puts a turn's image first, then its
/// text: model/chat_templates.h), so one user turn [image, question] gives exactly qwen2_vl_prompt_ids.
/// @throws InvalidArgument as qwen2_vl_prompt_ids, for a control token in any message's text, or when the
/// rendering does not hold `image_token_id` exactly once.
std::vector<int64_t> qwen2_vl_conversation_ids(const io::Tokenizer& tok,
                                               const std::vector<ChatMessage>& messages,
                                               int64_t image_token_id);

}  // namespace vispco
