// Log-probabilities of generated tokens (see logprobs.h).
#include "model/logprobs.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco {

namespace {

TokenLogprob candidate(int64_t id, double logprob, const io::Tokenizer& tok) {
  if (const auto* added = tok.added_token(id)) return {id, added->content, added->content, logprob};
  // Other ids beyond the tokenizer (a model's vocab may be padded past it) have no piece.
  const bool known = id >= 0 && id < tok.vocab_size();
  return {id, known ? tok.piece(id) : "", known ? tok.piece_bytes(id) : "", logprob};
}

// True when `s` is well-formed UTF-8 (a byte-fallback piece may hold one byte of a multi-byte character).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

nlohmann::json candidate_json(const TokenLogprob& t) {
  auto bytes = nlohmann::json::array();
  for (unsigned char c : t.bytes) bytes.push_back(static_cast<int>(c));
  // JSON strings must be UTF-8: a partial character is spelled by its piece ("<0xE2>"); "bytes" is exact.
  return {{"token", valid_utf8(t.bytes) ? t.bytes : t.piece},
          {"logprob", t.logprob},
          {"bytes", bytes},
          {"id", t.id},
          {"piece", t.piece}};
}

}  // namespace

StepLogprobs step_logprobs(const at::Tensor& logits, int64_t chosen, int64_t top_n) {
  if (top_n < 0 || top_n > 20)
    throw InvalidArgument("top logprobs must be in [0, 20], got " + std::to_string(top_n));
  const auto logp = logits.reshape({-1}).to(at::kCPU, at::kDouble).log_softmax(0);
  const int64_t V = logp.size(0);
  if (chosen < 0 || chosen >= V)
    throw InvalidArgument("token_logprobs: token " + std::to_string(chosen) + " outside the logits' " +
                          std::to_string(V) + " ids");
  StepLogprobs s;
  s.chosen = chosen;
  s.chosen_logprob = logp[chosen].item<double>();
  if (top_n > 0) {
    auto [vals, ids] = logp.topk(std::min(top_n, V));
    const auto v = vals.accessor<double, 1>();
    const auto i = ids.accessor<int64_t, 1>();
    for (int64_t k = 0; k < ids.size(0); ++k) {
      s.top_ids.push_back(i[k]);
      s.top_logprobs.push_back(v[k]);
    }
  }
  return s;
}

PositionLogprobs with_pieces(const StepLogprobs& s, const io::Tokenizer& tok) {
  PositionLogprobs p;
  p.chosen = candidate(s.chosen, s.chosen_logprob, tok);
  for (size_t k = 0; k < s.top_ids.size(); ++k)
    p.top.push_back(candidate(s.top_ids[k], s.top_logprobs[k], tok));
  return p;
}

std::vector<PositionLogprobs> token_logprobs(const std::vector<at::Tensor>& step_logits, int64_t row,
                                             const std::vector<int64_t>& tokens, int64_t top_n,
                                             const io::Tokenizer& tok) {
  if (top_n < 0 || top_n > 20)
    throw InvalidArgument("top logprobs must be in [0, 20], got " + std::to_string(top_n));
  if (step_logits.size() < tokens.size())
    throw InvalidArgument("token_logprobs: " + std::to_string(step_logits.size()) + " recorded steps for " +
                          std::to_string(tokens.size()) + " tokens (generate with record_logits)");
  std::vector<PositionLogprobs> out;
  for (size_t j = 0; j < tokens.size(); ++j) {
    const auto& l = step_logits[j];
    if (l.dim() != 2 || row < 0 || row >= l.size(0))
      throw InvalidArgument("token_logprobs: row " + std::to_string(row) + " outside the step logits " +
                            std::to_string(l.dim() == 2 ? l.size(0) : 0));
    out.push_back(with_pieces(step_logprobs(l[row], tokens[j], top_n), tok));
  }
  return out;
}

nlohmann::json to_openai_json(const std::vector<PositionLogprobs>& positions) {
  auto content = nlohmann::json::array();
  for (const auto& p : positions) {
    auto j = candidate_json(p.chosen);
    auto top = nlohmann::json::array();
    for (const auto& t : p.top) top.push_back(candidate_json(t));
    j["top_logprobs"] = top;
    content.push_back(j);
  }
  return content;
}

}  // namespace vispco
