// A POST /v1/chat/completions body in OpenAI's schema (platform.openai.com/docs/api-reference/chat/create),
// parsed and validated into what vispco's generate() needs: a conversation (an optional system message, then
// user / assistant turns alternating, ending with a user turn; model/chat_templates.h) whose contents are
// strings or lists of {"type": "text"} and {"type": "image_url"} parts, with exactly one image in a user
// turn; the image travels inline as a base64 data: URL.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/chat_message.h"
#include "model/generate.h"
#include "serve/frontier.h"

namespace vispco::serve {

/// Server-side bounds and defaults applied while parsing.
struct ChatLimits {
  /// max_tokens when the request names none, ≥ 1.
  int64_t default_max_tokens = 64;
  /// Largest max_tokens / max_completion_tokens accepted (larger → 400), ≥ default_max_tokens.
  int64_t max_tokens_cap = 1024;
};

/// A validated chat-completion request.
struct ChatRequest {
  std::string model;  ///< the "model" field ("" when absent)
  /// The conversation in the client's order (roles and parts; the image part's bytes are image_bytes),
  /// checked by model/chat_templates.h check_conversation().
  std::vector<ChatMessage> messages;
  std::string question;           ///< the last user turn's text parts, joined by "\n" (the current question)
  std::string image_bytes;        ///< the encoded image file (PNG, JPEG, WebP, BMP), from the data: URL
  GenerationConfig gen;           ///< max_tokens, temperature, top_p, seed (random when absent, as
                                  ///< OpenAI's), stop_at_eos (false with vLLM's "ignore_eos": true)
  std::vector<std::string> stop;  ///< up to 4 non-empty stop sequences
  bool stream = false;            ///< server-sent events
  bool include_usage = false;     ///< stream_options.include_usage: a last chunk with usage
  int64_t top_logprobs = -1;      ///< −1: no logprobs; 0–20 with "logprobs": true
  std::string plan;               ///< vispco.plan, "" = the server's default plan
  /// vispco.max_accuracy_loss / vispco.max_flops_ratio (serve/frontier.h); never together with a plan.
  Target target;
};

/// Parses and validates a request body (JSON nested deeper than 64 levels is refused before any use).
/// @throws ApiError 400 (invalid_request_error, naming the field) for malformed JSON, a missing or mistyped
/// field, a conversation check_conversation() refuses (roles out of order, no image or two, an image outside
/// a user turn), n ≠ 1,
/// out-of-range max_tokens / temperature / top_p / top_logprobs, top_logprobs without logprobs, a bad stop
/// list, a bad image URL (serve/data_url.h), or a vispco block that is not an object, has a non-numeric
/// or out-of-range target, or names a plan and a target together.
ChatRequest parse_chat_request(const std::string& body, const ChatLimits& limits = {});

/// Refuses a plan a request names that would make the server read a file of the client's choosing: a `.json`
/// plan path or any `file=` option (gate:…,file=, keep=auto:file=), and texts over 1,024 characters. The same
/// message whether or not the file exists. @throws ApiError 400 (param "vispco").
void check_request_plan(const std::string& plan);

}  // namespace vispco::serve
