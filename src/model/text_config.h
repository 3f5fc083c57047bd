// The Llama-style decoder's configuration (transformers LlamaConfig field names and defaults), shared by
// every family whose language model is a Llama-style decoder (model/llama.h).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace vispco {

/// Llama decoder (transformers LlamaConfig). Defaults are LlamaConfig's.
struct TextConfig {
  int64_t vocab_size = 32000;              ///< V, rows of embed_tokens / lm_head
  int64_t hidden_size = 4096;              ///< D
  int64_t intermediate_size = 11008;       ///< SwiGLU width m
  int64_t num_hidden_layers = 32;          ///< L
  int64_t num_attention_heads = 32;        ///< H
  int64_t num_key_value_heads = 32;        ///< H_kv; absent in JSON means "= H" (HF default)
  int64_t head_dim = 0;                    ///< D_h; 0 means hidden_size / H
  int64_t max_position_embeddings = 2048;  ///< longest sequence, tokens
  double rms_norm_eps = 1e-6;              ///< RMSNorm epsilon
  double rope_theta = 10000.0;             ///< RoPE base
  bool tie_word_embeddings = false;        ///< lm_head shares embed_tokens' weight
  bool attention_bias = false;             ///< q/k/v/o projections carry biases
  bool qkv_bias =
      false;  ///< q/k/v carry biases, o_proj none (Qwen2); set by the family, not a config.json key
  std::string hidden_act = "silu";  ///< SwiGLU activation; only "silu" supported
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;
  /// Multi-axis RoPE (M-RoPE, Qwen2-VL §2.1): frequencies per position axis (temporal, height, width),
  /// summing to D_h/2; config.json rope_scaling {"type": "mrope", "mrope_section": [...]}. Empty: 1-D RoPE.
  std::vector<int64_t> mrope_section;

  int64_t n_kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
  int64_t d_head() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  /// Position axes the decoder's RoPE reads: 1, or mrope_section.size().
  int64_t position_axes() const {
    return mrope_section.empty() ? 1 : static_cast<int64_t>(mrope_section.size());
  }
  bool operator==(const TextConfig&) const = default;
};

/// Parses a transformers text_config object of one of `model_types` (e.g. {"llama"}). Missing fields take
/// LlamaConfig's defaults; an `eos_token_id` list gives its first id; rope_scaling may only be M-RoPE's
/// {"type" (or "rope_type"): "mrope" | "default", "mrope_section": [...]}. @param where the object's name in
/// messages ("text_config"). @throws ConfigError for another model_type, another rope_scaling or a field of
/// the wrong JSON type, naming the field.
TextConfig text_config_from_json(const nlohmann::json& j, const std::string& where = "text_config");

/// Serialises to the transformers form (model_type "llama"); round-trips through text_config_from_json.
nlohmann::json text_config_to_json(const TextConfig& t);

/// A check of a model config's validate(). @throws ConfigError("invalid config: " + msg) unless `ok`.
void require_config(bool ok, const std::string& msg);
/// @throws ConfigError "invalid config: <where>.<name> must be > 0 (got <value>)" for the first field ≤ 0.
void require_positive(const std::string& where,
                      std::initializer_list<std::pair<const char*, int64_t>> fields);

/// Checks every field. @param where the prefix of messages ("text_config").
/// @throws ConfigError naming the field, its value and the valid range.
void validate_text_config(const TextConfig& t, const std::string& where = "text_config");

}  // namespace vispco
