// The LLaVA-1.5 ("vicuna_v1") conversation template the LLaVA family's prompts are built with: the first
// turn "USER: <image>\n{question} ASSISTANT:" with BOS, later turns "USER: {question} ASSISTANT:".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/chat_message.h"

namespace vispco {

/// LLaVA-1.5 prompt ids for "USER: <image>\n{question} ASSISTANT:": [BOS] + encode("USER: ") +
/// [image_token_index] + encode("\n{question} ASSISTANT:"), with exactly one image placeholder id (the
/// pipeline expands it to N_v visual tokens). Each text segment gets its own SentencePiece dummy prefix, as
/// LLaVA's tokenizer_image_token and HF's legacy (slow and fast) Llama tokenizers do; with Llama's model
/// this gives [1, 3148, 1001, 29901, 29871, <image>, 29871, 13, ...] ("▁US" "ER" ":" "▁", image, "▁" "\n").
/// HF tokenizers with legacy=false would drop the second segment's "▁" (29871); LLaVA-1.5 was trained with
/// it, so it is kept. A "<image>" inside `question` is treated as text (a second placeholder when the
/// tokenizer declares it as an added token, which generate() then refuses). image_token_index may lie after
/// the SentencePiece vocabulary (HF: 32000) or be negative (LLaVA: −200), or inside it when the tokenizer
/// declares it as an added token (a user-defined piece, as HF's LlavaProcessor accepts).
/// @throws InvalidArgument when image_token_index is an ordinary text piece of the tokenizer.
std::vector<int64_t> llava_prompt_ids(const io::Tokenizer& tok, const std::string& question,
                                      int64_t image_token_index);

/// A later turn of a LLaVA-1.5 conversation (no image, no BOS): "USER: {question} ASSISTANT:".
std::vector<int64_t> llava_followup_ids(const io::Tokenizer& tok, const std::string& question);

/// Prompt ids of a whole conversation in LLaVA-1.5's "vicuna_v1" template (LLaVA's conversation.py,
/// SeparatorStyle.TWO: "{system} USER: <image>\n{q1} ASSISTANT: {a1}</s>USER: {q2} ASSISTANT:"), built as
/// the bundled model was trained on several turns (train/teacher_forced_batch.cpp): segments tokenized apart,
/// each with SentencePiece's dummy prefix — [BOS] + encode("{system} USER: ") + [image] + encode("\n{q1}
/// ASSISTANT:"), each earlier answer encode("{a}") + [EOS] (the "</s>" separator is the EOS id, not text),
/// each later question llava_followup_ids. The user turn holding the image puts it first ("USER: <image>\n
/// {text}"), whatever the order of its parts; the system text (a first "system" message) and its " " come
/// before the first "USER: ", and no system sentence is added when there is none — so one user turn gives
/// exactly llava_prompt_ids. A message's text is message_text(). @param messages an optional system message,
/// then user / assistant turns alternating, ending with a user turn, one image in all (checked by
/// model/chat_templates.h check_conversation; here only roles are read). @throws InvalidArgument as
/// llava_prompt_ids, for a role other than system / user / assistant, or for a message whose text holds a
/// special added token's content (e.g. "</s>", "<s>", "<image>": the tokenizer would make it a control id,
/// letting client text end a turn and forge the next), as Qwen's template refuses its control tokens.
std::vector<int64_t> llava_conversation_ids(const io::Tokenizer& tok,
                                            const std::vector<ChatMessage>& messages,
                                            int64_t image_token_index);

}  // namespace vispco
