// The LLaVA-1.5 ("vicuna_v1") conversation template the LLaVA family's prompts are built with: the first
// turn "USER: <image>\n{question} ASSISTANT:" with BOS, later turns "USER: {question} ASSISTANT:".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"

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

}  // namespace vispco
