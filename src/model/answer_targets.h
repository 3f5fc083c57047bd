// Next-token targets of answer tokens in a prefilled multimodal sequence (loss on answer tokens only, as in
// LLaVA's instruction tuning), shared by every training loss that runs the prefill with autograd.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/generate.h"

namespace vispco {

/// Targets for a batch laid out by build_prefill_state (left padding, the image placeholder expanded to n_v
/// visual tokens). @param reqs the requests (each prompt_ids holds exactly one image_token_index)
/// @param answer_pos per request, indices into its prompt_ids of the tokens to predict (answer tokens, EOS)
/// @param n_v visual tokens per image @param T the padded sequence length of the prefill state.
/// @return int64 [B, T]: at the position before each answer token (the one that predicts it) that token's id,
/// −100 (cross_entropy's ignore_index) elsewhere. @throws InvalidArgument for a prompt without the
/// placeholder.
at::Tensor answer_targets(const std::vector<VlmRequest>& reqs,
                          const std::vector<std::vector<int64_t>>& answer_pos, int64_t image_token_index,
                          int64_t n_v, int64_t T);

}  // namespace vispco
