// A LLaVA-1.5 model loaded from a llama.cpp GGUF pair equals the same model loaded from its Hugging Face
// folder. The pair is written here as llama.cpp's converters write it (convert_hf_to_gguf.py for the text
// model: llama keys, blk.N.* names, q/k rows permuted by LlamaModel.permute, tokenizer.ggml.* from the
// SentencePiece vocabulary; examples/llava/convert_image_encoder_to_gguf.py for the mmproj: clip keys, v.* /
// mm.* names, fc1 named ffn_down; the legacy form drops the last vision layer and omits
// clip.vision.feature_layer), with the test's own writer (tests/io/gguf_writer.h). Compared: configuration,
// tokenizer encodings, image features, logits and greedy tokens, for both tokenizer kinds, both mmproj forms
// and F16 / Q8_0 weights.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/errors.h"
#include "io/gguf_writer.h"
#include "model/generate.h"
#include "model/llava/gguf_llava.h"
#include "model/llava/llava.h"
#include "model/llava/presets.h"
#include "model/model_source.h"
#include "test_util.h"
#include "tiny_model.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;
using testing::GgufWriter;

/// LlamaModel.permute of convert_hf_to_gguf.py, written out: head h's row 2j ← HF row j, row 2j+1 ← HF row
/// Dh/2 + j (RoPE pairs interleaved, as ggml's rope mode 0 reads them).
at::Tensor llama_cpp_permute(const at::Tensor& w, int64_t n_head) {
  const int64_t dh = w.size(0) / n_head;
  auto out = at::empty_like(w);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t j = 0; j < dh / 2; ++j) {
      out[h * dh + 2 * j] = w[h * dh + j];
      out[h * dh + 2 * j + 1] = w[h * dh + dh / 2 + j];
    }
  return out;
}

struct ConvertOptions {
  bool legacy_mmproj = true;  ///< drop the last vision layer, no clip.vision.feature_layer
  uint32_t weight_type = 0;   ///< ggml type of 2-D weights: 0 F32, 1 F16, 8 Q8_0
};

void convert(VisionLanguageModel& m, const std::string& text_path, const std::string& mmproj_path,
             const ConvertOptions& o) {
  const auto& c = m.config();
  std::map<std::string, at::Tensor> p;
  for (const auto& item : m.net()->named_parameters(true)) p[item.key()] = item.value().detach();
  auto type2d = [&](const at::Tensor& t) { return t.dim() == 2 && t.size(1) % 32 == 0 ? o.weight_type : 0u; };

  GgufWriter text;
  text.str("general.architecture", "llama");
  text.u32("llama.context_length", static_cast<uint32_t>(c.text.max_position_embeddings));
  text.u32("llama.embedding_length", static_cast<uint32_t>(c.text.hidden_size));
  text.u32("llama.feed_forward_length", static_cast<uint32_t>(c.text.intermediate_size));
  text.u32("llama.block_count", static_cast<uint32_t>(c.text.num_hidden_layers));
  text.u32("llama.attention.head_count", static_cast<uint32_t>(c.text.num_attention_heads));
  text.u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.text.n_kv_heads()));
  text.f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.text.rms_norm_eps));
  text.f32("llama.rope.freq_base", static_cast<float>(c.text.rope_theta));
  text.u32("llama.rope.dimension_count", static_cast<uint32_t>(c.text.d_head()));
  const auto& tok = m.tokenizer();
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int64_t i = 0; i < tok.vocab_size(); ++i) {
    pieces.push_back(tok.piece(i));
    scores.push_back(tok.piece_score(i));
    types.push_back(tok.added_token(i) ? 4 : static_cast<int32_t>(tok.piece_type(i)));  // user-defined
  }
  text.str("tokenizer.ggml.model", "llama");
  text.strings("tokenizer.ggml.tokens", pieces);
  text.floats("tokenizer.ggml.scores", scores);
  text.ints("tokenizer.ggml.token_type", types);
  text.u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tok.bos_id()));
  text.u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tok.eos_id()));
  text.u32("tokenizer.ggml.unknown_token_id", 0);
  const std::string lm = "language_model.model.";
  text.tensor("token_embd.weight", p[lm + "embed_tokens.weight"], type2d(p[lm + "embed_tokens.weight"]));
  text.tensor("output_norm.weight", p[lm + "norm.weight"], 0);
  if (!c.text.tie_word_embeddings)
    text.tensor("output.weight", p["language_model.lm_head.weight"],
                type2d(p["language_model.lm_head.weight"]));
  for (int64_t i = 0; i < c.text.num_hidden_layers; ++i) {
    const std::string h = lm + "layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
    text.tensor(g + "attn_norm.weight", p[h + "input_layernorm.weight"], 0);
    text.tensor(g + "ffn_norm.weight", p[h + "post_attention_layernorm.weight"], 0);
    const auto put = [&](const std::string& name, const at::Tensor& t) {
      text.tensor(g + name, t, type2d(t));
    };
    put("attn_q.weight", llama_cpp_permute(p[h + "self_attn.q_proj.weight"], c.text.num_attention_heads));
    put("attn_k.weight", llama_cpp_permute(p[h + "self_attn.k_proj.weight"], c.text.n_kv_heads()));
    put("attn_v.weight", p[h + "self_attn.v_proj.weight"]);
    put("attn_output.weight", p[h + "self_attn.o_proj.weight"]);
    put("ffn_gate.weight", p[h + "mlp.gate_proj.weight"]);
    put("ffn_up.weight", p[h + "mlp.up_proj.weight"]);
    put("ffn_down.weight", p[h + "mlp.down_proj.weight"]);
  }
  text.write(text_path);

  GgufWriter mm;
  mm.str("general.architecture", "clip");
  mm.boolean("clip.has_text_encoder", false);
  mm.boolean("clip.has_vision_encoder", true);
  mm.boolean("clip.has_llava_projector", true);
  mm.str("clip.projector_type", "mlp");
  const int64_t n = c.vision.num_hidden_layers, stored = o.legacy_mmproj ? c.n_vision_layers_used() : n;
  mm.u32("clip.vision.image_size", static_cast<uint32_t>(c.vision.image_size));
  mm.u32("clip.vision.patch_size", static_cast<uint32_t>(c.vision.patch_size));
  mm.u32("clip.vision.embedding_length", static_cast<uint32_t>(c.vision.hidden_size));
  mm.u32("clip.vision.feed_forward_length", static_cast<uint32_t>(c.vision.intermediate_size));
  mm.u32("clip.vision.projection_dim", 0);
  mm.u32("clip.vision.attention.head_count", static_cast<uint32_t>(c.vision.num_attention_heads));
  mm.f32("clip.vision.attention.layer_norm_epsilon", static_cast<float>(c.vision.layer_norm_eps));
  mm.u32("clip.vision.block_count", static_cast<uint32_t>(stored));
  if (!o.legacy_mmproj)  // HF's unsigned hidden-state index: −2 of n layers → n − 1
    mm.uints("clip.vision.feature_layer", {static_cast<uint32_t>(c.n_vision_layers_used())});
  const auto& pre = m.preprocess_config();
  mm.floats("clip.vision.image_mean", {pre.mean[0], pre.mean[1], pre.mean[2]});
  mm.floats("clip.vision.image_std", {pre.std[0], pre.std[1], pre.std[2]});
  mm.boolean("clip.use_gelu", c.vision.hidden_act == "gelu");
  const std::string vm = "vision_tower.vision_model.";
  mm.tensor("mm.0.weight", p["multi_modal_projector.linear_1.weight"],
            type2d(p["multi_modal_projector.linear_1.weight"]));
  mm.tensor("mm.0.bias", p["multi_modal_projector.linear_1.bias"], 0);
  mm.tensor("mm.2.weight", p["multi_modal_projector.linear_2.weight"],
            type2d(p["multi_modal_projector.linear_2.weight"]));
  mm.tensor("mm.2.bias", p["multi_modal_projector.linear_2.bias"], 0);
  mm.tensor("v.class_embd", p[vm + "embeddings.class_embedding"], 0);
  mm.tensor("v.patch_embd.weight", p[vm + "embeddings.patch_embedding.weight"], o.weight_type == 0 ? 0 : 1);
  mm.tensor("v.position_embd.weight", p[vm + "embeddings.position_embedding.weight"],
            o.weight_type == 0 ? 0 : 1);
  for (const char* s : {"weight", "bias"})
    mm.tensor(std::string("v.pre_ln.") + s, p[vm + "pre_layrnorm." + s], 0);
  for (int64_t i = 0; i < stored; ++i) {
    const std::string h = vm + "encoder.layers." + std::to_string(i) + ".",
                      g = "v.blk." + std::to_string(i) + ".";
    const std::pair<const char*, const char*> names[] = {
        {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"}, {"self_attn.out_proj", "attn_out"},
        {"layer_norm1", "ln1"},         {"layer_norm2", "ln2"},
        {"mlp.fc1", "ffn_down"},        {"mlp.fc2", "ffn_up"}};
    for (const auto& [hf, gg] : names)
      for (const char* s : {"weight", "bias"}) {
        const auto& t = p[h + hf + "." + s];
        mm.tensor(g + gg + "." + s, t, t.dim() == 2 ? type2d(t) : 0);
      }
  }
  mm.write(mmproj_path);
}

struct Compared {
  double feature_rel = 0, logits_max = 0;
  bool same_tokens = false;
};

Compared compare(VisionLanguageModel& hf, VisionLanguageModel& gg) {
  const auto px = testing::test_pixels(hf.config().vision.image_size, 5);
  const auto a = hf.encode_images(px.unsqueeze(0)).embeds;
  const auto b = gg.encode_images(px.unsqueeze(0)).embeds;
  GenerationConfig gc;
  gc.max_new_tokens = 6;
  gc.stop_at_eos = false;
  const std::string q = "What colour is the cube?";
  auto oa = generate(hf, {{px, hf.prompt_ids(q)}}, gc, nullptr, true);
  auto ob = generate(gg, {{px, gg.prompt_ids(q)}}, gc, nullptr, true);
  Compared r;
  r.feature_rel = ((a - b).norm() / a.norm()).item<double>();
  r.logits_max = (oa.step_logits[0] - ob.step_logits[0]).abs().max().item<double>();
  r.same_tokens = oa.tokens == ob.tokens;
  return r;
}

void round_trip(int64_t image_token_index, const ConvertOptions& o, double feature_tol, double logits_tol) {
  testing::TempDir tmp;
  auto cfg = find_preset("tiny").config;
  cfg.image_token_index = image_token_index;
  write_random_llava(tmp.str("hf"), cfg, 13, at::kFloat);
  auto hf = VisionLanguageModel::load(tmp.str("hf"), RunContext{});
  fs::create_directories(tmp.path() / "gguf");
  const auto text = tmp.str("gguf/model-f32.gguf"), mmproj = tmp.str("gguf/mmproj-model-f16.gguf");
  convert(hf, text, mmproj, o);

  // Every way of naming the pair resolves to it.
  for (const auto& spec : {text + "," + mmproj, tmp.str("gguf"), text}) {
    const auto src = resolve_model_source(spec);
    ASSERT_TRUE(src.is_gguf()) << spec;
    EXPECT_EQ(src.text_gguf, text);
    EXPECT_EQ(src.mmproj_gguf, mmproj);
  }
  auto gg = VisionLanguageModel::load(tmp.str("gguf"), RunContext{});
  const auto& a = hf.config();
  const auto& b = gg.config();
  auto bt = b.text;  // GGUF stores the epsilon as FLOAT32
  EXPECT_NEAR(bt.rms_norm_eps, a.text.rms_norm_eps, 1e-12);
  bt.rms_norm_eps = a.text.rms_norm_eps;
  EXPECT_EQ(a.text, bt);
  EXPECT_EQ(b.n_vision_layers_used(), a.n_vision_layers_used());
  EXPECT_EQ(b.vision.num_hidden_layers,
            o.legacy_mmproj ? a.n_vision_layers_used() : a.vision.num_hidden_layers);
  EXPECT_EQ(b.n_visual_tokens(), a.n_visual_tokens());
  EXPECT_EQ(load_llava_config(tmp.str("gguf")), b);  // the header-only path gives the loader's config

  for (const std::string s :
       {"How many red spheres are there?", "Is there a small cube left of the cylinder?",
        "text: ZQ-17 \u00e9\u00e8 \n tab\tend", "  two  spaces"}) {
    EXPECT_EQ(hf.tokenizer().encode(s, true), gg.tokenizer().encode(s, true)) << s;
    const auto ids = hf.tokenizer().encode(s, false);
    EXPECT_EQ(hf.tokenizer().decode(ids), gg.tokenizer().decode(ids)) << s;
  }
  const auto r = compare(hf, gg);
  std::printf("GGUF (image token %ld, %s mmproj, type %u): features rel %.2e, logits max |diff| %.2e\n",
              static_cast<long>(image_token_index), o.legacy_mmproj ? "legacy" : "feature_layer",
              o.weight_type, r.feature_rel, r.logits_max);
  EXPECT_LE(r.feature_rel, feature_tol);
  EXPECT_LE(r.logits_max, logits_tol);
  if (o.weight_type == 0) EXPECT_TRUE(r.same_tokens);
}

TEST(GgufLlava, LegacyF32PairEqualsTheHfFolder) {
  round_trip(find_preset("tiny").config.image_token_index, {true, 0}, 1e-6, 1e-5);
}

TEST(GgufLlava, ImageTokenInsideTheVocabularyAndFeatureLayerKey) {
  round_trip(kImageTokenInsideVocab, {false, 0}, 1e-6, 1e-5);
}

TEST(GgufLlava, F16AndQ8_0WeightsStayClose) {
  round_trip(find_preset("tiny").config.image_token_index, {true, 1}, 2e-3, 2e-2);
  round_trip(find_preset("tiny").config.image_token_index, {true, 8}, 2e-2, 1e-1);
}

TEST(GgufLlava, PermuteIsLlamaCppsAndUnpermuteItsInverse) {
  const auto w = at::arange(8 * 3, at::kFloat).reshape({8, 3});  // 2 heads of Dh = 4
  const auto g = llama_cpp_permute(w, 2);
  EXPECT_TRUE(at::equal(gguf_permute_qk(w, 2), g));
  EXPECT_TRUE(at::equal(gguf_unpermute_qk(g, 2), w));
  EXPECT_TRUE(at::equal(g[1], w[2]));  // head 0: rows 0, 2, 1, 3
  EXPECT_TRUE(at::equal(g[6], w[5]));  // head 1: rows 4, 6, 5, 7 → g[6] = w[5]
}

TEST(GgufLlava, RefusesWhatItCannotRun) {
  testing::TempDir tmp;
  auto hf = testing::load_tiny();
  const auto text = tmp.str("t.gguf"), mmproj = tmp.str("mmproj.gguf");
  convert(hf, text, mmproj, {});
  // An mmproj given as the text model, a second mmproj beside the text model, an unknown architecture.
  EXPECT_THROW(resolve_model_source(mmproj), ConfigError);
  fs::copy_file(mmproj, tmp.str("mmproj2.gguf"));
  EXPECT_THROW(resolve_model_source(text), ConfigError);
  EXPECT_NO_THROW(resolve_model_source(text + "," + mmproj));
  EXPECT_THROW(resolve_model_source(mmproj + "," + text), ConfigError);
  EXPECT_THROW(resolve_model_source(tmp.str("absent.gguf")), IoError);
  GgufWriter other;
  other.str("general.architecture", "qwen2");
  other.write(tmp.str("q.gguf"));
  try {
    load_llava_config(tmp.str("q.gguf") + "," + mmproj);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("supported: llama"), std::string::npos) << e.what();
  }
}

TEST(GgufLlava, CliGeneratesFromThePairWhatItGeneratesFromTheFolder) {
  testing::TempDir tmp;
  auto hf = testing::load_tiny();
  const auto text = tmp.str("t.gguf"), mmproj = tmp.str("mmproj.gguf");
  convert(hf, text, mmproj, {});
  const std::string image = tmp.str("img.png");
  cv::imwrite(image, cv::Mat(40, 60, CV_8UC3, cv::Scalar(10, 200, 30)));
  const std::string args = " --image " + image +
                           " --prompt 'What colour?' --max-new-tokens 4 --json --top-logprobs 3 --dtype fp32";
  auto a = testing::run_cli("generate --model " + testing::tiny_model_dir() + args);
  auto b = testing::run_cli("generate --model " + text + "," + mmproj + args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("vision features: all"), std::string::npos) << b.err;  // the layer choice is said
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["tokens"], jb["tokens"]);
  const auto& ca = ja["logprobs"]["content"];
  const auto& cb = jb["logprobs"]["content"];
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i)
    EXPECT_NEAR(ca[i]["logprob"].get<double>(), cb[i]["logprob"].get<double>(), 1e-5);

  // A corrupt text model: one line, exit 2, no LibTorch trace.
  auto bytes = testing::read_file(text);
  testing::write_file(tmp.str("bad.gguf"), bytes.substr(0, bytes.size() / 2));
  auto c = testing::run_cli("generate --model " + tmp.str("bad.gguf") + "," + mmproj + args);
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("bad.gguf"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("c10::"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace vispco
