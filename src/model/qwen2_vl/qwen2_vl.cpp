// The Qwen2-VL / Qwen2.5-VL families: network assembly, loading a Hugging Face folder, encoding images one by
// one, the shape, the registry rows.
#include "model/qwen2_vl/qwen2_vl.h"

#include <ATen/ATen.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <opencv2/core/mat.hpp>

#include "core/errors.h"
#include "io/hf_tokenizer.h"
#include "model/decoder_flops.h"
#include "model/llava/llava_folder.h"
#include "model/qwen2_vl/chat_template.h"
#include "model/qwen2_vl/vision_flops.h"
#include "model/weights.h"

namespace vispco {

namespace {

constexpr int64_t kNominalImage = 448;  // pixels a side of the image shape() describes

Qwen2VlConfig parse_config(const nlohmann::json& config) {
  Qwen2VlConfig cfg = qwen2_vl_config_from_json(config);
  cfg.validate();
  return cfg;
}

LoadedFamilyModel load_qwen2_vl_folder(const std::string& dir, const nlohmann::json& config,
                                       const RunContext& ctx) {
  const Qwen2VlConfig cfg = parse_folder_config(dir, [&] { return parse_config(config); });
  io::Tokenizer tok = io::load_tokenizer_json(dir);
  for (const auto& t : tok.added_tokens())  // the processor's <|image_pad|> must be the id the model replaces
    if (t.content == "<|image_pad|>" && t.id != cfg.image_token_id)
      throw ConfigError(dir + ": the tokenizer's <|image_pad|> is id " + std::to_string(t.id) +
                        " but config.json's image_token_id is " + std::to_string(cfg.image_token_id));
  Qwen2VlNet net = construct_for_loading<Qwen2VlNet>(cfg, ctx.dtype);
  load_checkpoint_weights(*net, dir, ctx, qwen2_vl_checkpoint_keys);
  release_freed_heap();
  return {std::make_shared<Qwen2VlModel>(cfg, net, load_qwen_image_processor_config(dir, cfg.vision)), tok};
}

ModelFamily family_row(bool qwen25) {
  ModelFamily f;
  f.architecture = qwen25 ? "Qwen2_5_VLForConditionalGeneration" : "Qwen2VLForConditionalGeneration";
  f.model_type = qwen25 ? "qwen2_5_vl" : "qwen2_vl";
  f.summary = qwen25 ? "Qwen2.5-VL: dynamic resolution, windowed ViT + 2x2 merger, Qwen2 decoder with M-RoPE"
                     : "Qwen2-VL: dynamic resolution, ViT + 2x2 merger, Qwen2 decoder with M-RoPE";
  f.shape = [](const nlohmann::json& config) { return qwen2_vl_shape(parse_config(config)); };
  f.load = load_qwen2_vl_folder;
  return f;
}

}  // namespace

Qwen2VlNetImpl::Qwen2VlNetImpl(const Qwen2VlConfig& cfg) {
  visual = register_module("visual", Qwen2VisionTransformer(cfg.vision));
  language_model = LlamaForCausalLM(cfg.text);
  register_module("model", language_model->model);
  if (language_model->lm_head) register_module("lm_head", language_model->lm_head);
}

void Qwen2VlNetImpl::train(bool on) {
  torch::nn::Module::train(on);
  language_model->train(on);
}

std::vector<std::string> qwen2_vl_checkpoint_keys(const std::string& name) {
  const auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("visual.")) return {name, "model." + name};
  if (starts("model.")) return {name, "model.language_model." + name.substr(6)};
  return {name};
}

ModelShape qwen2_vl_shape(const Qwen2VlConfig& cfg) {
  const auto& t = cfg.text;
  const auto& v = cfg.vision;
  const int64_t merged = kNominalImage / (v.patch_size * v.spatial_merge_size);
  ModelShape s;
  s.architecture = cfg.architecture();
  s.n_visual_tokens = merged * merged;
  s.grid_rows = s.grid_cols = merged;
  s.has_cls_token = false;
  s.position_axes = t.position_axes();
  s.n_layers = t.num_hidden_layers;
  s.hidden_size = t.hidden_size;
  s.vocab_size = t.vocab_size;
  s.max_positions = t.max_position_embeddings;
  s.image_token_id = cfg.image_token_id;
  s.bos_token_id = t.bos_token_id;
  s.vision_hidden_size = v.embed_dim;
  s.n_vision_layers = v.depth;
  s.image_size = kNominalImage;
  s.num_channels = v.in_channels;
  s.flops = qwen2_vl_flops_spec(cfg, merged * v.spatial_merge_size, merged * v.spatial_merge_size);
  return s;
}

FlopsSpec qwen2_vl_flops_spec(const Qwen2VlConfig& cfg, int64_t grid_h, int64_t grid_w) {
  const int64_t m = cfg.vision.spatial_merge_size;
  if (grid_h < m || grid_w < m || grid_h % m != 0 || grid_w % m != 0)
    throw InvalidArgument("Qwen2-VL patch grid " + std::to_string(grid_h) + "x" + std::to_string(grid_w) +
                          " is not a positive multiple of the merge size " + std::to_string(m));
  FlopsSpec f;
  f.n_visual_tokens = grid_h * grid_w / (m * m);
  const QwenVisionFlops vf = qwen_vision_flops(cfg.vision, 1, grid_h, grid_w);
  f.vision_patch_embed = std::llround(vf.patch_embed);
  f.vision_layers = std::llround(std::accumulate(vf.blocks.begin(), vf.blocks.end(), 0.0));
  f.projector = std::llround(vf.merger);
  f.decoder = decoder_flops_spec(cfg.text);
  return f;
}

Qwen2VlModel::Qwen2VlModel(Qwen2VlConfig cfg, Qwen2VlNet net, QwenImageProcessorConfig processor)
    : FamilyModelOf(cfg, qwen2_vl_shape(cfg), std::move(net), io::ImagePreprocessConfig{}),
      processor_(std::move(processor)) {
  pre_.image_size = static_cast<int>(kNominalImage);
  for (int c = 0; c < 3; ++c) {
    pre_.mean[c] = static_cast<float>(processor_.image_mean[c]);
    pre_.std[c] = static_cast<float>(processor_.image_std[c]);
  }
  pre_.pad_to_square = false;
}

at::Tensor Qwen2VlModel::preprocess(const cv::Mat& rgb) const {
  const QwenPixels p = qwen_preprocess(rgb, processor_);
  const int64_t m = cfg_.vision.spatial_merge_size;
  return p.pixel_values.reshape({p.grid_t, p.grid_h / m, p.grid_w / m, m * m, p.pixel_values.size(1)});
}

VisualTokens Qwen2VlModel::encode_images(const at::Tensor& pixels, bool want_cls_attention) {
  if (pixels.dim() != 6)
    throw InvalidArgument("Qwen2-VL encode_images: expected pixels [B, grid_t, H/2, W/2, 4, F], got " +
                          std::to_string(pixels.dim()) + "-d");
  return encode_image_list(pixels.unbind(0), want_cls_attention);
}

VisualTokens Qwen2VlModel::encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention) {
  if (pixels.empty()) throw InvalidArgument("encode_image_list: no images");
  const auto& v = cfg_.vision;
  const int64_t m = v.spatial_merge_size,
                f = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  std::vector<VisualTokens> rows;
  for (const auto& p : pixels) {
    if (p.dim() != 5 || p.size(3) != m * m || p.size(4) != f)
      throw InvalidArgument("Qwen2-VL: expected one image's pixels [grid_t, H/" + std::to_string(m) + ", W/" +
                            std::to_string(m) + ", " + std::to_string(m * m) + ", " + std::to_string(f) +
                            "] (its preprocess), got " + std::to_string(p.dim()) + "-d");
    const int64_t gt = p.size(0), rows_m = p.size(1), cols_m = p.size(2);
    VisualTokens row;
    QwenAttentionSignal signal;  // the last block's received attention and keys per merged token
    row.embeds =
        net_->visual
            ->forward(p.reshape({-1, f}), gt, rows_m * m, cols_m * m, want_cls_attention ? &signal : nullptr)
            .unsqueeze(0);
    if (want_cls_attention) {
      row.cls_attention = signal.received.unsqueeze(0);  // [1, N_v] fp32
      row.keys = signal.keys.unsqueeze(0);               // [1, N_v, E]
    }
    row.layouts = {{row.embeds.size(1), rows_m, cols_m}};
    rows.push_back(std::move(row));
  }
  return stack_visual_tokens(rows, shape_);
}

std::vector<TokenPanel> Qwen2VlModel::token_panels(int64_t height, int64_t width) const {
  const int64_t factor = cfg_.vision.patch_size * cfg_.vision.spatial_merge_size;
  const auto [h, w] = smart_resize(height, width, factor, processor_.min_pixels, processor_.max_pixels);
  TokenPanel p;
  p.rows = h / factor;
  p.cols = w / factor;
  p.stride = p.cols;
  p.width = static_cast<double>(width);
  p.height = static_cast<double>(height);
  return {p};
}

FlopsSpec Qwen2VlModel::image_flops(int64_t height, int64_t width) const {
  if (height < 1 || width < 1)
    throw InvalidArgument("image size must be positive (got " + std::to_string(width) + "x" +
                          std::to_string(height) + ")");
  const int64_t p = cfg_.vision.patch_size;
  const auto [h, w] = smart_resize(height, width, p * cfg_.vision.spatial_merge_size, processor_.min_pixels,
                                   processor_.max_pixels);
  return qwen2_vl_flops_spec(cfg_, h / p, w / p);
}

std::vector<int64_t> Qwen2VlModel::prompt_ids(const io::Tokenizer& tok, const std::string& question) const {
  return qwen2_vl_prompt_ids(tok, question, cfg_.image_token_id);
}

ModelFamily qwen2_vl_family() { return family_row(false); }
ModelFamily qwen2_5_vl_family() { return family_row(true); }

}  // namespace vispco
