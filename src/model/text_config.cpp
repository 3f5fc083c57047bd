// Parsing, validation and serialisation of the Llama-style decoder's config (transformers LlamaConfig).
#include "model/text_config.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"

namespace vispco {
namespace {

// An eos_token_id given as a list (Llama-3, Qwen2 configs): its first id.
int64_t first_eos_id(const nlohmann::json& v) {
  return v.is_array() && !v.empty() ? v[0].get<int64_t>() : v.get<int64_t>();
}

// M-RoPE's sections from a rope_scaling object; any other scaling is refused.
std::vector<int64_t> mrope_section_of(const nlohmann::json& r, const std::string& where) {
  const auto type = r.is_object() ? r.value("type", r.value("rope_type", std::string())) : std::string();
  if (!r.is_object() || (type != "mrope" && type != "default") || !r.contains("mrope_section") ||
      !r["mrope_section"].is_array())
    throw ConfigError(where + ".rope_scaling is not supported (got " + r.dump() +
                      "; supported: M-RoPE's {\"type\": \"mrope\", \"mrope_section\": [...]})");
  try {
    return r["mrope_section"].get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(where + ".rope_scaling.mrope_section has the wrong type (got " +
                      r["mrope_section"].dump() + ")");
  }
}

// TextConfig's keys in config.json (head_dim is written only when set: transformers reads 0 literally).
const JsonFields<TextConfig>& text_fields() {
  using C = TextConfig;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<TextConfig> fields("text_config", {
      {"vocab_size", &C::vocab_size}, {"hidden_size", &C::hidden_size},
      {"intermediate_size", &C::intermediate_size}, {"num_hidden_layers", &C::num_hidden_layers},
      {"num_attention_heads", &C::num_attention_heads}, {"num_key_value_heads", &C::num_key_value_heads},
      omitted_at_default("head_dim", &C::head_dim),
      {"max_position_embeddings", &C::max_position_embeddings}, {"rms_norm_eps", &C::rms_norm_eps},
      {"rope_theta", &C::rope_theta}, {"tie_word_embeddings", &C::tie_word_embeddings},
      {"attention_bias", &C::attention_bias}, {"hidden_act", &C::hidden_act},
      {"bos_token_id", &C::bos_token_id},
      converted("eos_token_id", &C::eos_token_id, first_eos_id, [](int64_t id) { return nlohmann::json(id); })});
  // clang-format on
  return fields;
}

}  // namespace

void require_config(bool ok, const std::string& msg) {
  if (!ok) throw ConfigError("invalid config: " + msg);
}

void require_positive(const std::string& where,
                      std::initializer_list<std::pair<const char*, int64_t>> fields) {
  for (const auto& [name, x] : fields)
    require_config(x > 0, where + "." + name + " must be > 0 (got " + std::to_string(x) + ")");
}

TextConfig text_config_from_json(const nlohmann::json& j, const std::string& where) {
  TextConfig t;
  if (j.contains("model_type") && j["model_type"] != "llama")
    throw ConfigError(where + ".model_type " + j["model_type"].dump() +
                      " is not supported (supported: llama)");
  text_fields().read_known(j, t, where);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    t.mrope_section = mrope_section_of(j["rope_scaling"], where);
  if (t.num_key_value_heads <= 0) t.num_key_value_heads = t.num_attention_heads;  // HF: None means MHA
  return t;
}

nlohmann::json text_config_to_json(const TextConfig& t) {
  nlohmann::json j = text_fields().write(t);
  j["num_key_value_heads"] = t.n_kv_heads();
  if (!t.mrope_section.empty()) j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", t.mrope_section}};
  j["model_type"] = "llama";
  j["architectures"] = {"LlamaForCausalLM"};
  return j;
}

void validate_text_config(const TextConfig& t, const std::string& w) {
  require_positive(w, {{"vocab_size", t.vocab_size},
                       {"hidden_size", t.hidden_size},
                       {"intermediate_size", t.intermediate_size},
                       {"num_hidden_layers", t.num_hidden_layers},
                       {"num_attention_heads", t.num_attention_heads},
                       {"max_position_embeddings", t.max_position_embeddings}});
  require_config(t.num_attention_heads % t.n_kv_heads() == 0,
                 w + ".num_attention_heads " + std::to_string(t.num_attention_heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(t.n_kv_heads()));
  require_config(t.head_dim > 0 || t.hidden_size % t.num_attention_heads == 0,
                 w + ".hidden_size is not divisible by num_attention_heads and head_dim is not set");
  require_config(t.d_head() % 2 == 0, "head dim " + std::to_string(t.d_head()) + " must be even for RoPE");
  require_config(t.hidden_act == "silu", w + ".hidden_act '" + t.hidden_act + "' (valid: silu)");
  require_config(t.rope_theta > 0, w + ".rope_theta must be > 0");
  if (!t.mrope_section.empty()) {
    int64_t total = 0;
    for (const auto s : t.mrope_section) {
      require_config(s > 0, w + ".rope_scaling.mrope_section entries must be > 0");
      total += s;
    }
    require_config(total == t.d_head() / 2, w + ".rope_scaling.mrope_section sums to " +
                                                std::to_string(total) +
                                                ", not head dim / 2 = " + std::to_string(t.d_head() / 2));
  }
}

}  // namespace vispco
