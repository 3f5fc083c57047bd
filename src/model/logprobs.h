// Log-probabilities of generated tokens with their top alternatives, in OpenAI's chat-completions "logprobs"
// layout (choices[].logprobs.content[]: token, logprob, bytes, top_logprobs[]), for `vispco generate
// --top-logprobs` and the server — so vispco's numbers can be compared with transformers', llama.cpp's or a
// paper's.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace vispco {

/// One candidate token at a position.
struct TokenLogprob {
  int64_t id = 0;
  std::string piece;   ///< SentencePiece piece ("▁star"); an added token's content ("<image>")
  std::string bytes;   ///< its text as bytes (io::Tokenizer::piece_bytes: " star")
  double logprob = 0;  ///< natural log of its probability
};

/// One generated position: the chosen token and the `top_n` most likely ones, most likely first.
struct PositionLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

/// One generated position's numbers without the tokenizer's pieces: what a decode batch keeps per step for
/// a request that wants logprobs (a few dozen bytes instead of the [V] fp32 logits).
struct StepLogprobs {
  int64_t chosen = 0;                ///< the generated id
  double chosen_logprob = 0;         ///< its log-probability (natural log, fp64)
  std::vector<int64_t> top_ids;      ///< the top_n most likely ids, most likely first
  std::vector<double> top_logprobs;  ///< their log-probabilities
};

/// The log-softmax (fp64, temperature 1) of one step's logits at `chosen` and its `top_n` largest entries.
/// @param logits [V] or [1, V] floating point @throws InvalidArgument for top_n outside [0, 20] or `chosen`
/// outside [0, V).
StepLogprobs step_logprobs(const at::Tensor& logits, int64_t chosen, int64_t top_n);

/// A position with the tokenizer's pieces and bytes filled in.
PositionLogprobs with_pieces(const StepLogprobs& s, const io::Tokenizer& tok);

/// Log-probabilities of the tokens row `row` generated: log-softmax of each step's raw logits (temperature 1,
/// before any top-p filter — the model's distribution, whatever the sampler drew with), in fp64.
/// @param step_logits GenerationOutput::step_logits (generate(..., record_logits = true)): per step [B, V]
/// fp32
/// @param tokens that row's generated ids (GenerationOutput::tokens[row]; EOS excluded, so there may be one
/// step more than tokens) @param top_n alternatives per position, in [0, 20] (OpenAI's range)
/// @throws InvalidArgument for top_n outside [0, 20], a row outside the batch, fewer steps than tokens, or a
/// token id outside the logits.
std::vector<PositionLogprobs> token_logprobs(const std::vector<at::Tensor>& step_logits, int64_t row,
                                             const std::vector<int64_t>& tokens, int64_t top_n,
                                             const io::Tokenizer& tok);

/// OpenAI's `logprobs.content` array: [{"token", "logprob", "bytes": [ints], "top_logprobs": [...]}], each
/// entry also carrying vispco's "id" and "piece".
nlohmann::json to_openai_json(const std::vector<PositionLogprobs>& positions);

}  // namespace vispco
