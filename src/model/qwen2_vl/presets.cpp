// Qwen2-VL presets and random folders (see presets.h). Dimensions from the published config.json files of
// Qwen/Qwen2-VL-2B-Instruct, Qwen/Qwen2-VL-7B-Instruct, Qwen/Qwen2.5-VL-3B-Instruct,
// Qwen/Qwen2.5-VL-7B-Instruct.
#include "model/qwen2_vl/presets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/named_table.h"
#include "io/bpe_model.h"
#include "io/utf8.h"
#include "model/weights.h"

namespace vispco {

namespace {

// The Qwen2 decoder of a preset: M-RoPE, q/k/v biases, Qwen's special ids starting at `first_special`.
Qwen2VlConfig qwen(bool qwen25, TextConfig t, Qwen2VisionConfig v, int64_t first_special) {
  Qwen2VlConfig c;
  c.qwen25 = qwen25;
  t.qkv_bias = true;
  t.hidden_act = "silu";
  t.bos_token_id = first_special;      // <|endoftext|>
  t.eos_token_id = first_special + 2;  // <|im_end|>
  c.text = t;
  c.vision = v;
  c.vision.out_hidden_size = t.hidden_size;
  if (qwen25) {
    c.text.max_position_embeddings = 128000;  // Qwen2.5-VL's published configs
    c.vision.tokens_per_second = 2;
  }
  c.vision_start_token_id = first_special + 9;
  c.vision_end_token_id = first_special + 10;
  c.image_token_id = first_special + 12;
  c.video_token_id = first_special + 13;
  return c;
}

TextConfig text(int64_t vocab, int64_t d, int64_t m, int64_t layers, int64_t heads, int64_t kv, bool tie,
                std::vector<int64_t> mrope) {
  TextConfig t;
  t.vocab_size = vocab, t.hidden_size = d, t.intermediate_size = m, t.num_hidden_layers = layers;
  t.num_attention_heads = heads, t.num_key_value_heads = kv, t.tie_word_embeddings = tie;
  t.max_position_embeddings = 32768, t.rope_theta = 1e6, t.rms_norm_eps = 1e-6;
  t.mrope_section = std::move(mrope);
  return t;
}

Qwen2VisionConfig vision(bool qwen25, int64_t depth, int64_t e, int64_t heads, int64_t m) {
  Qwen2VisionConfig v = qwen25 ? qwen25_vision_defaults() : Qwen2VisionConfig{};
  v.depth = depth, v.embed_dim = e, v.num_heads = heads, v.intermediate_size = m;
  return v;
}

Qwen2VlConfig tiny(bool qwen25) {
  Qwen2VisionConfig v = vision(qwen25, 4, 32, 2, qwen25 ? 48 : 128);
  if (qwen25) v.fullatt_block_indexes = {1, 3};
  // Qwen2's added tokens right after the 256 byte characters, in the published order (bos 256 … image_pad
  // 268).
  return qwen(qwen25, text(300, 64, 128, 3, 4, 2, !qwen25, {2, 3, 3}), v, 256);
}

// The added tokens of Qwen2's tokenizer.json and their ids (151643 + offset in the published files).
const std::vector<std::pair<std::string, int64_t>>& qwen_special_offsets() {
  static const std::vector<std::pair<std::string, int64_t>> t = {
      {"<|endoftext|>", 0},      {"<|im_start|>", 1},     {"<|im_end|>", 2},      {"<|object_ref_start|>", 3},
      {"<|object_ref_end|>", 4}, {"<|box_start|>", 5},    {"<|box_end|>", 6},     {"<|quad_start|>", 7},
      {"<|quad_end|>", 8},       {"<|vision_start|>", 9}, {"<|vision_end|>", 10}, {"<|vision_pad|>", 11},
      {"<|image_pad|>", 12},     {"<|video_pad|>", 13}};
  return t;
}

void write_json(const std::filesystem::path& p, const nlohmann::json& j) {
  std::ofstream out(p);
  out << j.dump(2) << "\n";
  if (!out) throw IoError("cannot write '" + p.string() + "'");
}

// tokenizer.json (+ tokenizer_config.json): 256 byte characters, Qwen2's pre-tokenizer, Qwen2's 14 added
// tokens from bos_token_id on in the published order (image_pad, vision_start and vision_end at the config's
// ids).
void write_byte_tokenizer(const std::filesystem::path& dir, const Qwen2VlConfig& cfg) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    io::append_utf8(ch, io::byte_to_unicode(static_cast<unsigned char>(b)));
    vocab[ch] = b;
  }
  nlohmann::json added = nlohmann::json::array(), decoder = nlohmann::json::object();
  std::vector<int64_t> used;
  for (const auto& [content, offset] : qwen_special_offsets()) {
    int64_t id = cfg.text.bos_token_id + offset;  // <|endoftext|> is the first added token, as published
    if (content == "<|image_pad|>") id = cfg.image_token_id;
    if (content == "<|vision_start|>") id = cfg.vision_start_token_id;
    if (content == "<|vision_end|>") id = cfg.vision_end_token_id;
    if (id < 256 || id >= cfg.text.vocab_size || std::find(used.begin(), used.end(), id) != used.end())
      throw ConfigError("special token " + content + " would get id " + std::to_string(id) +
                        ": taken by the byte vocabulary or another special token, or past vocab_size " +
                        std::to_string(cfg.text.vocab_size));
    used.push_back(id);
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
    decoder[std::to_string(id)] = {{"content", content}, {"special", true}};
  }
  const char* pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const nlohmann::json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", false},
           {"use_regex", false}}}}}},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}, {"ignore_merges", false}}}};
  write_json(dir / "tokenizer.json", tokenizer);
  write_json(dir / "tokenizer_config.json", {{"tokenizer_class", "Qwen2Tokenizer"},
                                             {"bos_token", nullptr},
                                             {"eos_token", "<|im_end|>"},
                                             {"pad_token", "<|endoftext|>"},
                                             {"added_tokens_decoder", decoder}});
}

}  // namespace

const std::vector<Qwen2VlPreset>& qwen2_vl_presets() {
  static const std::vector<Qwen2VlPreset> table = [] {
    Qwen2VlConfig q2_2b = qwen(false, text(151936, 1536, 8960, 28, 12, 2, true, {16, 24, 24}),
                               vision(false, 32, 1280, 16, 5120), 151643);
    Qwen2VlConfig q2_7b = qwen(false, text(152064, 3584, 18944, 28, 28, 4, false, {16, 24, 24}),
                               vision(false, 32, 1280, 16, 5120), 151643);
    Qwen2VlConfig q25_3b = qwen(true, text(151936, 2048, 11008, 36, 16, 2, true, {16, 24, 24}),
                                vision(true, 32, 1280, 16, 3420), 151643);
    Qwen2VlConfig q25_7b = qwen(true, text(152064, 3584, 18944, 28, 28, 4, false, {16, 24, 24}),
                                vision(true, 32, 1280, 16, 3420), 151643);
    return std::vector<Qwen2VlPreset>{
        {"tiny-qwen2-vl", "tests: Qwen2-VL, 64-wide 3-layer decoder, 32-wide 4-block tower", tiny(false)},
        {"tiny-qwen2.5-vl", "tests: Qwen2.5-VL, as tiny-qwen2-vl with windowed RMSNorm/SwiGLU tower",
         tiny(true)},
        {"qwen2-vl-2b", "Qwen/Qwen2-VL-2B-Instruct dimensions", q2_2b},
        {"qwen2-vl-7b", "Qwen/Qwen2-VL-7B-Instruct dimensions", q2_7b},
        {"qwen2.5-vl-3b", "Qwen/Qwen2.5-VL-3B-Instruct dimensions", q25_3b},
        {"qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct dimensions", q25_7b}};
  }();
  return table;
}

const Qwen2VlPreset& find_qwen2_vl_preset(const std::string& name) {
  return find_named(qwen2_vl_presets(), name, "Qwen2-VL preset");
}

Qwen2VlNet random_qwen2_vl_net(const Qwen2VlConfig& cfg, uint64_t seed, c10::ScalarType dtype) {
  auto net = random_net<Qwen2VlNet>(cfg, seed, dtype);
  at::NoGradGuard no_grad;
  for (auto& p : net->named_parameters(true))
    if (p.key() == "visual.merger.ln_q.weight") p.value().fill_(1.0);
  return net;
}

void write_random_qwen2_vl(const std::string& dir, const Qwen2VlConfig& cfg, uint64_t seed,
                           c10::ScalarType dtype, const QwenImageProcessorConfig& processor) {
  cfg.validate();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create folder '" + dir + "': " + ec.message());
  write_byte_tokenizer(dir, cfg);  // first: it refuses colliding ids before the weights are made
  auto net = random_qwen2_vl_net(cfg, seed, dtype);
  save_hf_folder(dir, *net, qwen2_vl_config_to_json(cfg), dtype);
  write_json(std::filesystem::path(dir) / "preprocessor_config.json", to_json(processor));
}

}  // namespace vispco
