// The LLaVA-NeXT family: network assembly, loading a Hugging Face folder, encoding images (tower per image,
// projector, packing), its registry row.
#include "model/llava_next/llava_next.h"

#include <ATen/ATen.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/llava/llava_folder.h"
#include "model/llava/llava_prompt.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/image_processor.h"
#include "model/llava_next/llava_next_shape.h"
#include "model/llava_next/pack.h"
#include "model/weights.h"

namespace vispco {

LlavaNextNetImpl::LlavaNextNetImpl(const LlavaNextConfig& cfg) {
  vision_tower = register_module("vision_tower", ClipVisionTower(cfg.llava.vision));
  multi_modal_projector = register_module("multi_modal_projector", LlavaProjector(cfg.llava));
  image_newline = register_parameter("image_newline", at::zeros({cfg.llava.text.hidden_size}));
  language_model = register_module("language_model", LlamaForCausalLM(cfg.llava.text));
}

namespace {

LlavaNextConfig parse_config(const nlohmann::json& config) {
  LlavaNextConfig cfg = llava_next_config_from_json(config);
  cfg.validate();
  return cfg;
}

LoadedFamilyModel load_llava_next_folder(const std::string& dir, const nlohmann::json& config,
                                         const RunContext& ctx) {
  const LlavaNextConfig cfg = parse_folder_config(dir, [&] { return parse_config(config); });
  return load_llava_style_folder<LlavaNextModel, LlavaNextNet>(dir, cfg, cfg.llava, ctx);
}

}  // namespace

LlavaNextModel::LlavaNextModel(LlavaNextConfig cfg, LlavaNextNet net, io::ImagePreprocessConfig pre)
    : FamilyModelOf(cfg, llava_next_shape(cfg), std::move(net), pre) {
  pre_.image_size = static_cast<int>(cfg_.llava.vision.image_size);
  pre_.pad_to_square = false;
}

at::Tensor LlavaNextModel::preprocess(const cv::Mat& rgb) const { return anyres_preprocess(rgb, cfg_, pre_); }

VisualTokens LlavaNextModel::encode_images(const at::Tensor& pixels, bool want_cls_attention) {
  if (pixels.dim() != 5)
    throw InvalidArgument("LLaVA-NeXT encode_images: expected pixels [B, 1 + tiles + 1, 3, S, S], got " +
                          std::to_string(pixels.dim()) + "-d");
  return encode_image_list(pixels.unbind(0), want_cls_attention);
}

VisualTokens LlavaNextModel::encode_image_list(const std::vector<at::Tensor>& pixels,
                                               bool want_cls_attention) {
  if (pixels.empty()) throw InvalidArgument("encode_image_list: no images");
  std::vector<VisualTokens> rows;
  for (const auto& p : pixels) rows.push_back(encode_one(p, want_cls_attention));
  return stack_visual_tokens(rows, shape_);
}

VisualTokens LlavaNextModel::encode_one(const at::Tensor& pixels, bool want_cls_attention) {
  const int64_t s = cfg_.llava.vision.image_size;
  if (pixels.dim() != 4 || pixels.size(0) < 3 || pixels.size(1) != 3 || pixels.size(2) != s ||
      pixels.size(3) != s)
    throw InvalidArgument("LLaVA-NeXT: expected one image's pixels [1 + tiles + 1, 3, " + std::to_string(s) +
                          ", " + std::to_string(s) + "] (its preprocess), got " +
                          std::to_string(pixels.dim()) + "-d " +
                          (pixels.dim() > 0 ? std::to_string(pixels.size(0)) + " × …" : std::string()));
  const auto [height, width] = decode_image_size_slice(pixels[pixels.size(0) - 1]);
  const AnyresGeometry g = anyres_geometry(height, width, cfg_);
  if (pixels.size(0) != 2 + g.n_tiles())
    throw InvalidArgument("LLaVA-NeXT: a " + std::to_string(width) + "×" + std::to_string(height) +
                          " image has " + std::to_string(g.n_tiles()) +
                          " tiles under this model's "
                          "image_grid_pinpoints, but its pixels hold " +
                          std::to_string(pixels.size(0) - 2) + " (preprocessed for another model?)");
  VisualTokens tower = llava_tower_tokens(net_->vision_tower, cfg_.llava,
                                          pixels.narrow(0, 0, 1 + g.n_tiles()), want_cls_attention);
  const auto features = net_->multi_modal_projector->forward(tower.embeds);  // [1 + T, n², D]
  VisualTokens row;
  row.embeds = pack_image_features(features, net_->image_newline, g).unsqueeze(0);  // [1, N_v, D]
  if (tower.cls_attention.defined()) {  // [1 + T, n²] → [1, N_v]; newline tokens 0
    const auto a = tower.cls_attention.unsqueeze(-1);
    row.cls_attention = pack_image_features(a, at::zeros({1}, a.options()), g).squeeze(-1).unsqueeze(0);
  }
  if (tower.keys.defined())  // [1 + T, n², D_v] → [1, N_v, D_v]; newline tokens zero vectors
    row.keys = pack_image_features(tower.keys, at::zeros({tower.keys.size(2)}, tower.keys.options()), g)
                   .unsqueeze(0);
  row.layouts = {g.layout()};
  return row;
}

FlopsSpec LlavaNextModel::image_flops(int64_t height, int64_t width) const {
  return llava_next_image_flops(cfg_, height, width);
}

std::vector<TokenPanel> LlavaNextModel::token_panels(int64_t height, int64_t width) const {
  const AnyresGeometry g = anyres_geometry(height, width, cfg_);
  const int64_t n = g.grid, tile = cfg_.llava.vision.image_size;
  TokenPanel base;
  base.rows = base.cols = base.stride = n;
  base.width = double(width);
  base.height = double(height);
  base.square = true;
  // Canvas pixels (the resized image centred on the padded canvas) → original image pixels.
  const double sx = double(width) / double(g.canvas.resized.width),
               sy = double(height) / double(g.canvas.resized.height), cell = double(tile) / double(n);
  const auto image_x = [&](double canvas_x) { return (canvas_x - double(g.canvas.left)) * sx; };
  const auto image_y = [&](double canvas_y) { return (canvas_y - double(g.canvas.top)) * sy; };
  TokenPanel high;
  high.first = n * n;
  high.rows = g.unpad.n_rows;
  high.cols = g.unpad.n_cols;
  high.stride = g.unpad.n_cols + 1;  // the row's image_newline token after its cells
  high.x0 = image_x(double(g.unpad.col0) * cell);
  high.y0 = image_y(double(g.unpad.row0) * cell);
  high.width = image_x(double(g.unpad.col0 + g.unpad.n_cols) * cell) - high.x0;
  high.height = image_y(double(g.unpad.row0 + g.unpad.n_rows) * cell) - high.y0;
  for (int64_t j = 1; j < g.tile_cols; ++j) high.x_lines.push_back(image_x(double(j * tile)));
  for (int64_t i = 1; i < g.tile_rows; ++i) high.y_lines.push_back(image_y(double(i * tile)));
  return {base, high};
}

std::vector<int64_t> LlavaNextModel::prompt_ids(const io::Tokenizer& tok, const std::string& question) const {
  return llava_prompt_ids(tok, question, cfg_.llava.image_token_index);
}

ModelFamily llava_next_family() {
  ModelFamily f;
  f.architecture = "LlavaNextForConditionalGeneration";
  f.model_type = "llava_next";
  f.summary =
      "LLaVA-NeXT (v1.6): AnyRes tiles + base image through a CLIP tower, 2-layer MLP projector, "
      "image_newline, "
      "Llama decoder (up to 2,928 visual tokens at the 336-px pinpoints)";
  f.shape = [](const nlohmann::json& config) { return llava_next_shape(parse_config(config)); };
  f.load = load_llava_next_folder;
  return f;
}

void save_llava_next(const std::string& dir, const LlavaNextConfig& cfg, LlavaNextNet& net,
                     c10::ScalarType dtype) {
  save_hf_folder(dir, *net, llava_next_config_to_json(cfg), dtype);
}

}  // namespace vispco
