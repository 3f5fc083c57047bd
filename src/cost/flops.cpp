// FLOPs model of VLMs; formulas and conventions in flops.h.
#include "cost/flops.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"

namespace vispco {

namespace {

void require_count(bool ok, const std::string& what, int64_t got, const std::string& valid) {
  if (!ok) throw InvalidArgument(what + " must be " + valid + " (got " + std::to_string(got) + ")");
}

void require_layers(const std::vector<int64_t>& v, int64_t n_layers, const std::string& what) {
  if (static_cast<int64_t>(v.size()) != n_layers)
    throw InvalidArgument(what + " must hold one entry per decoder layer: expected " +
                          std::to_string(n_layers) + ", got " + std::to_string(v.size()));
}

}  // namespace

nlohmann::json PrefillFlops::to_json() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : decoder)
    layers.push_back({{"n_tokens", l.n_tokens},
                      {"n_keys", l.n_keys},
                      {"projections", l.projections},
                      {"attention", l.attention},
                      {"mlp", l.mlp},
                      {"total", l.total()}});
  return {{"vision_patch_embed", vision_patch_embed},
          {"vision_layers", vision_layers},
          {"vision", vision},
          {"projector", projector},
          {"decoder", layers},
          {"decoder_total", decoder_total},
          {"lm_head", lm_head},
          {"total", total}};
}

int64_t vision_layer_flops(int64_t hidden_size, int64_t intermediate_size, int64_t n_tokens) {
  require_count(n_tokens >= 1, "vision layer token count", n_tokens, "≥ 1");
  const int64_t n = n_tokens, d = hidden_size, m = intermediate_size;
  const int64_t projections = 4 * 2 * n * d * d;  // q, k, v, out: [n, D_v] × [D_v, D_v]
  const int64_t attention = 2 * 2 * n * n * d;    // QKᵀ and P·V over all heads (H_v·D_h = D_v)
  const int64_t mlp = 2 * 2 * n * d * m;          // fc1 [n, D_v] × [D_v, m_v], fc2 back
  return projections + attention + mlp;
}

DecoderLayerFlops decoder_layer_flops(const DecoderFlopsSpec& t, int64_t n_tokens, int64_t n_keys) {
  require_count(n_tokens >= 1, "decoder layer token count", n_tokens, "≥ 1");
  require_count(n_keys >= n_tokens, "decoder layer key count", n_keys,
                "≥ the token count " + std::to_string(n_tokens));
  const int64_t n = n_tokens, d = t.hidden_size, m = t.intermediate_size;
  const int64_t q_width = t.num_heads * t.head_dim, kv_width = t.num_kv_heads * t.head_dim;
  DecoderLayerFlops f;
  f.n_tokens = n;
  f.n_keys = n_keys;
  f.projections = 2 * (2 * n * d * q_width) + 2 * (2 * n * d * kv_width);  // q + o, k + v
  f.attention = 2 * 2 * n * n_keys * q_width;  // every query head over S keys (GQA shares K/V, not the work)
  f.mlp = 2 * 3 * n * d * m;                   // gate, up, down
  return f;
}

int64_t lm_head_flops(const DecoderFlopsSpec& t, int64_t n_positions) {
  require_count(n_positions >= 0, "LM head position count", n_positions, "≥ 0");
  return 2 * n_positions * t.hidden_size * t.vocab_size;
}

std::vector<int64_t> unpruned_tokens_per_layer(const FlopsSpec& spec, int64_t n_text) {
  require_count(n_text >= 0, "text token count", n_text, "≥ 0");
  return std::vector<int64_t>(static_cast<size_t>(spec.decoder.num_layers), n_text + spec.n_visual_tokens);
}

PrefillFlops prefill_flops(const FlopsSpec& spec, const std::vector<int64_t>& tokens_per_layer,
                           const FlopsOptions& opts) {
  const auto& t = spec.decoder;
  require_layers(tokens_per_layer, t.num_layers, "tokens_per_layer");
  PrefillFlops f;
  f.vision_patch_embed = spec.vision_patch_embed;
  f.vision_layers = spec.vision_layers;
  f.vision = f.vision_patch_embed + f.vision_layers;
  f.projector = spec.projector;
  for (size_t i = 0; i < tokens_per_layer.size(); ++i) {
    const int64_t n = tokens_per_layer[i];
    require_count(n >= 1, "tokens_per_layer[" + std::to_string(i) + "]", n, "≥ 1");
    f.decoder.push_back(decoder_layer_flops(t, n, n));
    f.decoder_total += f.decoder.back().total();
  }
  f.lm_head =
      lm_head_flops(t, opts.lm_head_all_positions && !tokens_per_layer.empty() ? tokens_per_layer.back() : 1);
  f.total = f.vision + f.projector + f.decoder_total + f.lm_head;
  return f;
}

DecodeFlops decode_step_flops(const FlopsSpec& spec, const std::vector<int64_t>& cache_len_per_layer) {
  require_layers(cache_len_per_layer, spec.decoder.num_layers, "cache_len_per_layer");
  DecodeFlops f;
  for (size_t i = 0; i < cache_len_per_layer.size(); ++i) {
    const int64_t s = cache_len_per_layer[i];
    require_count(s >= 0, "cache_len_per_layer[" + std::to_string(i) + "]", s, "≥ 0");
    f.decoder.push_back(decoder_layer_flops(spec.decoder, 1, s + 1));  // the new token also attends to itself
    f.decoder_total += f.decoder.back().total();
  }
  f.lm_head = lm_head_flops(spec.decoder, 1);
  f.total = f.decoder_total + f.lm_head;
  return f;
}

int64_t simplified_layer_flops(int64_t n, int64_t d, int64_t m) {
  require_count(n >= 1, "token count n", n, "≥ 1");
  require_count(d >= 1, "hidden size d", d, "≥ 1");
  require_count(m >= 1, "FFN size m", m, "≥ 1");
  return 4 * n * d * d + 2 * n * n * d + 2 * n * d * m;
}

int64_t simplified_decoder_flops(const DecoderFlopsSpec& t, const std::vector<int64_t>& tokens_per_layer) {
  require_layers(tokens_per_layer, t.num_layers, "tokens_per_layer");
  int64_t sum = 0;
  for (const int64_t n : tokens_per_layer)
    sum += simplified_layer_flops(n, t.hidden_size, t.intermediate_size);
  return sum;
}

}  // namespace vispco
