// The LLaVA-1.5 family: network assembly, loading (Hugging Face folder or GGUF pair), image encoding, its
// registry row.
#include "model/llava/llava.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <torch/nn/utils.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/default_dtype.h"
#include "core/errors.h"
#include "core/json_file.h"
#include "io/added_tokens.h"
#include "io/safetensors.h"
#include "model/blocks.h"
#include "model/llava/gguf_llava.h"
#include "model/llava/llava_folder.h"
#include "model/llava/llava_prompt.h"
#include "model/llava/llava_shape.h"
#include "model/model_source.h"
#include "model/quant.h"
#include "model/weights.h"

namespace vispco {

namespace fs = std::filesystem;

LlavaProjectorImpl::LlavaProjectorImpl(const LlavaConfig& cfg) : act(cfg.projector_hidden_act) {
  const int64_t dv = cfg.vision.hidden_size, d = cfg.text.hidden_size;
  linear_1 = register_module("linear_1",
                             torch::nn::Linear(torch::nn::LinearOptions(dv, d).bias(cfg.projector_bias)));
  linear_2 =
      register_module("linear_2", torch::nn::Linear(torch::nn::LinearOptions(d, d).bias(cfg.projector_bias)));
}

at::Tensor LlavaProjectorImpl::forward(const at::Tensor& x) {
  return linear_forward(linear_2, activation(linear_forward(linear_1, x), act));
}

LlavaNetImpl::LlavaNetImpl(const LlavaConfig& cfg) {
  vision_tower = register_module("vision_tower", ClipVisionTower(cfg.vision));
  multi_modal_projector = register_module("multi_modal_projector", LlavaProjector(cfg));
  language_model = register_module("language_model", LlamaForCausalLM(cfg.text));
}

namespace {

LlavaConfig parse_config(const nlohmann::json& config) {
  LlavaConfig cfg = llava_config_from_json(config);
  cfg.validate();
  return cfg;
}

io::ImagePreprocessConfig default_preprocess(const LlavaConfig& cfg) {
  io::ImagePreprocessConfig p;
  p.image_size = static_cast<int>(cfg.vision.image_size);
  return p;
}

LoadedFamilyModel load_llava_gguf(const ModelSource& src, const RunContext& ctx) {
  GgufLlava g = load_gguf_llava(src);
  std::fprintf(stderr, "%s\n", g.vision_layer_note.c_str());  // stderr: stdout may carry --json
  auto tok = io::Tokenizer::from_serialized(g.tokenizer_proto);
  if (g.image_token_id >= 0) tok.set_added_tokens({{g.image_token_id, "<image>", true}});
  LlavaNet net = construct_for_loading<LlavaNet>(g.config, ctx.dtype);
  {
    at::NoGradGuard no_grad;
    TensorSource ts{"GGUF pair " + src.text_gguf + " + " + src.mmproj_gguf,
                    [&](const std::string& k) { return g.tensors.count(k) != 0; },
                    [&](const std::string& k) { return g.tensors.at(k); }, g.tensors.size()};
    load_weights(*net, ts, ctx);
  }
  release_freed_heap();
  return {std::make_shared<LlavaModel>(g.config, net, g.preprocess), tok};
}

LoadedFamilyModel load_llava_folder(const std::string& dir, const nlohmann::json& config,
                                    const RunContext& ctx) {
  const LlavaConfig cfg = parse_folder_config(dir, [&] { return parse_config(config); });
  return load_llava_style_folder<LlavaModel, LlavaNet>(dir, cfg, cfg, ctx);
}

ModelShape llava_shape_of_json(const nlohmann::json& config) { return llava_shape(parse_config(config)); }

}  // namespace

io::Tokenizer load_llava_tokenizer(const std::string& dir, int64_t image_token_index) {
  auto tok = io::Tokenizer::load((fs::path(dir) / "tokenizer.model").string());
  tok.set_added_tokens(io::load_added_tokens(dir));
  for (const auto& t : tok.added_tokens())  // the processor's "<image>" must be the id the model replaces
    if (t.content == "<image>" && t.id != image_token_index)
      throw ConfigError(dir + ": the tokenizer's <image> is id " + std::to_string(t.id) +
                        " but config.json's image_token_index is " + std::to_string(image_token_index));
  return tok;
}

LlavaModel::LlavaModel(LlavaConfig cfg, LlavaNet net, io::ImagePreprocessConfig pre)
    : FamilyModelOf(cfg, llava_shape(cfg), std::move(net), pre) {}

at::Tensor LlavaModel::preprocess(const cv::Mat& rgb) const { return io::preprocess_llava(rgb, pre_); }

VisualTokens llava_tower_tokens(ClipVisionTower& tower, const LlavaConfig& cfg, const at::Tensor& pixels,
                                bool want_cls_attention) {
  const bool drop_cls = cfg.vision_feature_select_strategy == "default";
  auto vo = tower->forward(pixels, cfg.n_vision_layers_used(), drop_cls, want_cls_attention);
  VisualTokens out;
  out.embeds = vo.features;
  if (vo.cls_attention.defined()) out.cls_attention = vo.cls_attention.mean(1);
  out.keys = vo.keys;
  return out;
}

VisualTokens LlavaModel::encode_images(const at::Tensor& pixels, bool want_cls_attention) {
  VisualTokens out = llava_tower_tokens(net_->vision_tower, cfg_, pixels, want_cls_attention);
  out.embeds = net_->multi_modal_projector->forward(out.embeds);
  return out;
}

std::vector<int64_t> LlavaModel::prompt_ids(const io::Tokenizer& tok, const std::string& question) const {
  return llava_prompt_ids(tok, question, cfg_.image_token_index);
}

ModelFamily llava_family() {
  ModelFamily f;
  f.architecture = "LlavaForConditionalGeneration";
  f.model_type = "llava";
  f.summary = "LLaVA-1.5: CLIP ViT tower, 2-layer MLP projector, Llama decoder (576 visual tokens at 336 px)";
  f.shape = llava_shape_of_json;
  f.load = load_llava_folder;
  f.gguf_shape = [](const ModelSource& src) { return llava_shape(gguf_llava_config(src)); };
  f.load_gguf = load_llava_gguf;
  return f;
}

VisionLanguageModel::VisionLanguageModel(LlavaConfig cfg, LlavaNet net, io::Tokenizer tok, RunContext ctx)
    : VisionLanguageModel(std::make_shared<LlavaModel>(cfg, net, default_preprocess(cfg)), std::move(tok),
                          ctx) {}

namespace {
LlavaModel& llava_of(FamilyModel& f) {
  auto* m = dynamic_cast<LlavaModel*>(&f);
  if (!m)
    throw ConfigError("this needs a LLaVA-1.5 model (LlavaForConditionalGeneration); the loaded model is " +
                      f.shape().architecture);
  return *m;
}
}  // namespace

const LlavaConfig& VisionLanguageModel::config() const { return llava_of(*family_).config(); }
LlavaNet& VisionLanguageModel::net() { return llava_of(*family_).net(); }

void save_llava(const std::string& dir, const LlavaConfig& cfg, LlavaNet& net, c10::ScalarType dtype) {
  save_hf_folder(dir, *net, llava_config_to_json(cfg), dtype);
}

}  // namespace vispco
