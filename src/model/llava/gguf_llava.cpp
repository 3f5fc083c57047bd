// GGUF pair → vispco LLaVA: keys (llama.cpp src/llama-arch.cpp LLM_KV names, examples/llava/clip.cpp KEY_*),
// tensor names (LLM_TENSOR_NAMES for "llama"; clip.cpp TN_*), tokenizer (tokenizer.ggml.* of the "llama"
// SentencePiece vocabulary).
#include "model/llava/gguf_llava.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/errors.h"
#include "io/gguf.h"
#include "io/spm_model_proto.h"

namespace vispco {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw ConfigError("GGUF file '" + path + "': " + what);
}

void check_text_arch(const io::GgufFile& f) {
  const std::string arch = f.get_string("general.architecture", "");
  if (arch != "llama")
    fail(f.path(), "general.architecture '" + arch +
                       "' is not supported as the text model (supported: llama, with a clip mmproj whose "
                       "projector_type is mlp — LLaVA-1.5)");
}

void check_mmproj(const io::GgufFile& f) {
  if (f.get_string("general.architecture", "") != "clip")
    fail(f.path(), "not an mmproj file (general.architecture '" + f.get_string("general.architecture", "") +
                       "', expected clip)");
  if (!f.get_bool("clip.has_vision_encoder", true)) fail(f.path(), "clip.has_vision_encoder is false");
  // Legacy files say clip.has_llava_projector; newer (mtmd) ones only clip.projector_type.
  if (!f.get_bool("clip.has_llava_projector", false) && !f.find("clip.projector_type"))
    fail(f.path(),
         "neither clip.has_llava_projector nor clip.projector_type: a CLIP model without LLaVA's projector");
  const std::string proj = f.get_string("clip.projector_type", "mlp");
  if (proj != "mlp")
    fail(f.path(),
         "clip.projector_type '" + proj + "' is not supported (supported: mlp, LLaVA-1.5's 2-layer MLP)");
  if (f.tensor_info("mm.1.weight") || f.tensor_info("mm.3.weight"))
    fail(f.path(), "a normalised MLP projector (mm.1 / mm.3 tensors, Yi-VL) is not supported");
}

int64_t rows_of(const io::GgufFile& f, const std::string& name) {
  const io::GgufTensorInfo* t = f.tensor_info(name);
  if (!t) fail(f.path(), "missing tensor '" + name + "'");
  return t->shape[0];
}

TextConfig text_config(const io::GgufFile& f) {
  check_text_arch(f);
  TextConfig t;
  const std::string p = "llama.";
  t.hidden_size = f.get_int(p + "embedding_length");
  t.intermediate_size = f.get_int(p + "feed_forward_length");
  t.num_hidden_layers = f.get_int(p + "block_count");
  t.num_attention_heads = f.get_int(p + "attention.head_count");
  t.num_key_value_heads = f.get_int(p + "attention.head_count_kv", t.num_attention_heads);
  t.max_position_embeddings = f.get_int(p + "context_length", t.max_position_embeddings);
  t.rms_norm_eps = f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5);
  t.rope_theta = f.get_float(p + "rope.freq_base", 10000.0);
  if (t.num_attention_heads <= 0) fail(f.path(), "llama.attention.head_count must be > 0");
  const int64_t key_len = f.get_int(p + "attention.key_length", t.hidden_size / t.num_attention_heads);
  if (key_len * t.num_attention_heads != t.hidden_size) t.head_dim = key_len;
  const int64_t rope_dim = f.get_int(p + "rope.dimension_count", key_len);
  if (rope_dim != key_len)
    fail(f.path(), "llama.rope.dimension_count " + std::to_string(rope_dim) + " ≠ head dim " +
                       std::to_string(key_len) + ": partial rotary embeddings are not supported");
  const std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  if (scaling != "none" && scaling != "")
    fail(f.path(), "llama.rope.scaling.type '" + scaling + "' is not supported (supported: none)");
  t.vocab_size = rows_of(f, "token_embd.weight");
  t.tie_word_embeddings = f.tensor_info("output.weight") == nullptr;
  t.attention_bias = f.tensor_info("blk.0.attn_q.bias") != nullptr;
  t.bos_token_id = f.get_int("tokenizer.ggml.bos_token_id", 1);
  t.eos_token_id = f.get_int("tokenizer.ggml.eos_token_id", 2);
  return t;
}

/// Vision config, and which layer feeds the projector (see gguf_llava.h).
VisionConfig vision_config(const io::GgufFile& f, int64_t* feature_layer, std::string* note) {
  check_mmproj(f);
  VisionConfig v;
  v.hidden_size = f.get_int("clip.vision.embedding_length");
  v.intermediate_size = f.get_int("clip.vision.feed_forward_length");
  v.num_hidden_layers = f.get_int("clip.vision.block_count");
  v.num_attention_heads = f.get_int("clip.vision.attention.head_count");
  v.image_size = f.get_int("clip.vision.image_size");
  v.patch_size = f.get_int("clip.vision.patch_size");
  v.layer_norm_eps = f.get_float("clip.vision.attention.layer_norm_epsilon", 1e-5);
  v.hidden_act = f.get_bool("clip.use_gelu", false) ? "gelu" : "quick_gelu";
  const int64_t n = v.num_hidden_layers;
  if (const io::GgufValue* fl = f.find("clip.vision.feature_layer")) {
    if (fl->type != io::GgufType::kArray || fl->ints.size() != 1)
      fail(f.path(),
           "clip.vision.feature_layer must list one layer for LLaVA-1.5 (several layers are LLaVA-NeXT / "
           "Granite Vision, not supported)");
    *feature_layer = fl->ints[0];  // HF's hidden-state index, already unsigned
    if (*feature_layer < 1 || *feature_layer > n)
      fail(f.path(), "clip.vision.feature_layer " + std::to_string(*feature_layer) + " is outside the " +
                         std::to_string(n) + " stored layers");
    *note = "vision features: hidden state " + std::to_string(*feature_layer) + " of " + std::to_string(n) +
            " stored layers (clip.vision.feature_layer)";
  } else {
    *feature_layer = -1;
    *note =
        "vision features: all " + std::to_string(n) +
        " stored layers (no clip.vision.feature_layer: the llava converter stored the tower up to LLaVA's "
        "vision_feature_layer, as HF computes it; llama.cpp itself runs " +
        std::to_string(n - 1) + ", ggml-org/llama.cpp#25817)";
  }
  return v;
}

LlavaConfig config_of(const io::GgufFile& text, const io::GgufFile& mmproj, std::string* note,
                      int64_t* image_token_id) {
  LlavaConfig c;
  c.text = text_config(text);
  int64_t feature_layer = -1;
  c.vision = vision_config(mmproj, &feature_layer, note);
  c.vision_feature_layer = feature_layer;
  c.vision_feature_select_strategy = "default";  // LLaVA-1.5: [CLS] dropped (clip.cpp keeps the patches only)
  c.projector_hidden_act = "gelu";
  c.projector_bias = mmproj.tensor_info("mm.0.bias") != nullptr;
  c.pad_token_id = text.get_int("tokenizer.ggml.padding_token_id", -1);
  *image_token_id = -1;
  if (const io::GgufValue* toks = text.find("tokenizer.ggml.tokens"))
    for (size_t i = 0; i < toks->strings.size(); ++i)
      if (toks->strings[i] == "<image>") *image_token_id = static_cast<int64_t>(i);
  // Without an "<image>" piece (llama.cpp inserts the embeddings itself), the placeholder is the first id
  // after the vocabulary, as in HF's llava-1.5 (32000); the pipeline replaces it before the embedding lookup.
  c.image_token_index = *image_token_id >= 0 ? *image_token_id : c.text.vocab_size;
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw ConfigError("GGUF pair '" + text.path() + "' + '" + mmproj.path() + "': " + e.what());
  }
  return c;
}

std::string tokenizer_of(const io::GgufFile& f, int64_t n_vocab) {
  const std::string model = f.get_string("tokenizer.ggml.model", "");
  if (model != "llama")
    fail(f.path(),
         "tokenizer.ggml.model '" + model +
             "' is not supported (supported: llama, the SentencePiece vocabulary of Llama/LLaVA-1.5)");
  const io::GgufValue* toks = f.find("tokenizer.ggml.tokens");
  if (!toks || toks->type != io::GgufType::kArray || toks->array_type != io::GgufType::kString)
    fail(f.path(), "tokenizer.ggml.tokens must be an array of strings");
  const size_t n = toks->strings.size();
  const io::GgufValue* scores = f.find("tokenizer.ggml.scores");
  const io::GgufValue* types = f.find("tokenizer.ggml.token_type");
  if (scores && scores->floats.size() != n)
    fail(f.path(), "tokenizer.ggml.scores has another length than tokens");
  if (types && types->ints.size() != n)
    fail(f.path(), "tokenizer.ggml.token_type has another length than tokens");
  if (static_cast<int64_t>(n) > n_vocab)
    fail(f.path(),
         std::to_string(n) + " tokens but token_embd.weight has " + std::to_string(n_vocab) + " rows");
  io::SpmModelSpec spec;
  spec.add_dummy_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", true);
  spec.unk_id = static_cast<int32_t>(f.get_int("tokenizer.ggml.unknown_token_id", 0));
  spec.bos_id = static_cast<int32_t>(f.get_int("tokenizer.ggml.bos_token_id", 1));
  spec.eos_id = static_cast<int32_t>(f.get_int("tokenizer.ggml.eos_token_id", 2));
  spec.pad_id = static_cast<int32_t>(f.get_int("tokenizer.ggml.padding_token_id", -1));
  if (spec.pad_id == spec.unk_id || spec.pad_id == spec.bos_id || spec.pad_id == spec.eos_id)
    spec.pad_id = -1;
  bool any_byte = false;
  for (size_t i = 0; i < n; ++i) {
    io::SpmPiece p;
    p.piece = toks->strings[i];
    p.score = scores ? static_cast<float>(scores->floats[i]) : 0.f;
    const int64_t t = types ? types->ints[i] : 1;
    if (t < 1 || t > 6)
      fail(f.path(), "tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(t));
    p.type = static_cast<io::SpmPieceType>(t);
    any_byte = any_byte || p.type == io::SpmPieceType::kByte;
    spec.pieces.push_back(std::move(p));
  }
  // SentencePiece needs its special ids typed as such.
  auto force = [&](int32_t id, io::SpmPieceType type) {
    if (id >= 0 && id < static_cast<int32_t>(n)) spec.pieces[id].type = type;
  };
  force(spec.unk_id, io::SpmPieceType::kUnknown);
  force(spec.bos_id, io::SpmPieceType::kControl);
  force(spec.eos_id, io::SpmPieceType::kControl);
  force(spec.pad_id, io::SpmPieceType::kControl);
  spec.byte_fallback = any_byte;
  try {
    return io::serialize_spm_model(spec);
  } catch (const InvalidArgument& e) {
    fail(f.path(), std::string("tokenizer: ") + e.what());
  }
}

io::ImagePreprocessConfig preprocess_of(const io::GgufFile& f, const LlavaConfig& c) {
  io::ImagePreprocessConfig p;
  p.image_size = static_cast<int>(c.vision.image_size);
  for (const auto& [key, dst] :
       {std::pair{"clip.vision.image_mean", &p.mean}, std::pair{"clip.vision.image_std", &p.std}})
    if (const io::GgufValue* v = f.find(key)) {
      if (v->floats.size() != 3) fail(f.path(), std::string(key) + " must hold 3 numbers");
      for (int k = 0; k < 3; ++k) (*dst)[k] = static_cast<float>(v->floats[k]);
    }
  return p;
}

}  // namespace

at::Tensor gguf_unpermute_qk(const at::Tensor& w, int64_t n_head) {
  auto sizes = w.sizes().vec();
  std::vector<int64_t> view{n_head, sizes[0] / n_head / 2, 2};
  view.insert(view.end(), sizes.begin() + 1, sizes.end());
  return w.reshape(view).transpose(1, 2).reshape(sizes).contiguous();
}

at::Tensor gguf_permute_qk(const at::Tensor& w, int64_t n_head) {
  auto sizes = w.sizes().vec();
  std::vector<int64_t> view{n_head, 2, sizes[0] / n_head / 2};
  view.insert(view.end(), sizes.begin() + 1, sizes.end());
  return w.reshape(view).transpose(1, 2).reshape(sizes).contiguous();
}

LlavaConfig gguf_llava_config(const ModelSource& src) {
  const auto text = io::GgufFile::open(src.text_gguf);
  const auto mmproj = io::GgufFile::open(src.mmproj_gguf);
  std::string note;
  int64_t image_id = -1;
  return config_of(text, mmproj, &note, &image_id);
}

GgufLlava load_gguf_llava(const ModelSource& src) {
  const auto text = io::GgufFile::open(src.text_gguf);
  const auto mmproj = io::GgufFile::open(src.mmproj_gguf);
  GgufLlava out;
  out.config = config_of(text, mmproj, &out.vision_layer_note, &out.image_token_id);
  const auto& c = out.config;
  out.tokenizer_proto = tokenizer_of(text, c.text.vocab_size);
  out.preprocess = preprocess_of(mmproj, c);
  auto& t = out.tensors;

  // Text model: LLM_TENSOR_NAMES of llama.
  const std::string lm = "language_model.model.";
  t[lm + "embed_tokens.weight"] = text.tensor("token_embd.weight");
  t[lm + "norm.weight"] = text.tensor("output_norm.weight");
  if (!c.text.tie_word_embeddings) t["language_model.lm_head.weight"] = text.tensor("output.weight");
  const char* suffixes[] = {"weight", "bias"};
  for (int64_t i = 0; i < c.text.num_hidden_layers; ++i) {
    const std::string g = "blk." + std::to_string(i) + ".", h = lm + "layers." + std::to_string(i) + ".";
    t[h + "input_layernorm.weight"] = text.tensor(g + "attn_norm.weight");
    t[h + "post_attention_layernorm.weight"] = text.tensor(g + "ffn_norm.weight");
    for (const char* s : suffixes) {
      if (std::string(s) == "bias" && !c.text.attention_bias) continue;
      t[h + "self_attn.q_proj." + s] =
          gguf_unpermute_qk(text.tensor(g + "attn_q." + s), c.text.num_attention_heads);
      t[h + "self_attn.k_proj." + s] = gguf_unpermute_qk(text.tensor(g + "attn_k." + s), c.text.n_kv_heads());
      t[h + "self_attn.v_proj." + s] = text.tensor(g + "attn_v." + s);
      t[h + "self_attn.o_proj." + s] = text.tensor(g + "attn_output." + s);
    }
    t[h + "mlp.gate_proj.weight"] = text.tensor(g + "ffn_gate.weight");
    t[h + "mlp.up_proj.weight"] = text.tensor(g + "ffn_up.weight");
    t[h + "mlp.down_proj.weight"] = text.tensor(g + "ffn_down.weight");
  }

  // Image encoder and projector: clip.cpp's TN_* names.
  const std::string vm = "vision_tower.vision_model.";
  t[vm + "embeddings.class_embedding"] = mmproj.tensor("v.class_embd");
  t[vm + "embeddings.patch_embedding.weight"] = mmproj.tensor("v.patch_embd.weight");
  t[vm + "embeddings.position_embedding.weight"] = mmproj.tensor("v.position_embd.weight");
  for (const char* s : suffixes) {
    t[vm + "pre_layrnorm." + s] = mmproj.tensor(std::string("v.pre_ln.") + s);
    t[vm + "post_layernorm." + s] = mmproj.tensor_info(std::string("v.post_ln.") + s)
                                        ? mmproj.tensor(std::string("v.post_ln.") + s)
                                        : (std::string(s) == "weight" ? at::ones({c.vision.hidden_size})
                                                                      : at::zeros({c.vision.hidden_size}));
  }
  for (int64_t i = 0; i < c.vision.num_hidden_layers; ++i) {
    const std::string g = "v.blk." + std::to_string(i) + ".",
                      h = vm + "encoder.layers." + std::to_string(i) + ".";
    // The llava converter names CLIP's fc1 "ffn_down" and fc2 "ffn_up"; a converter using the other names
    // would swap them, so fc1 is told by its shape [intermediate, hidden].
    const bool down_is_fc1 = mmproj.tensor_info(g + "ffn_down.weight") &&
                             rows_of(mmproj, g + "ffn_down.weight") == c.vision.intermediate_size;
    const std::string fc1 = down_is_fc1 ? "ffn_down." : "ffn_up.",
                      fc2 = down_is_fc1 ? "ffn_up." : "ffn_down.";
    for (const char* s : suffixes) {
      t[h + "self_attn.q_proj." + s] = mmproj.tensor(g + "attn_q." + s);
      t[h + "self_attn.k_proj." + s] = mmproj.tensor(g + "attn_k." + s);
      t[h + "self_attn.v_proj." + s] = mmproj.tensor(g + "attn_v." + s);
      t[h + "self_attn.out_proj." + s] = mmproj.tensor(g + "attn_out." + s);
      t[h + "layer_norm1." + s] = mmproj.tensor(g + "ln1." + s);
      t[h + "layer_norm2." + s] = mmproj.tensor(g + "ln2." + s);
      t[h + "mlp.fc1." + s] = mmproj.tensor(g + fc1 + s);
      t[h + "mlp.fc2." + s] = mmproj.tensor(g + fc2 + s);
    }
  }
  for (const char* s : suffixes) {
    if (std::string(s) == "bias" && !c.projector_bias) continue;
    t[std::string("multi_modal_projector.linear_1.") + s] = mmproj.tensor(std::string("mm.0.") + s);
    t[std::string("multi_modal_projector.linear_2.") + s] = mmproj.tensor(std::string("mm.2.") + s);
  }
  return out;
}

}  // namespace vispco
