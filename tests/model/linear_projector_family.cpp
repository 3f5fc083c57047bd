// The test family of linear_projector_family.h: its network, its FamilyModel and its registry row, written
// only against src/model's seam (family.h, weights.h, the LLaVA config parser and prompt template).
#include "model/linear_projector_family.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/llava/clip_vision.h"
#include "model/llava/config.h"
#include "model/llava/llava.h"
#include "model/llava/llava_prompt.h"
#include "model/llava/llava_shape.h"
#include "model/tiny_model.h"
#include "model/tiny_variant.h"
#include "model/weights.h"

namespace vispco::testing {

namespace fs = std::filesystem;

namespace {

struct LinearProjectorNetImpl : torch::nn::Module {
  explicit LinearProjectorNetImpl(const LlavaConfig& cfg) {
    vision_tower = register_module("vision_tower", ClipVisionTower(cfg.vision));
    multi_modal_projector = register_module("multi_modal_projector",
                                            torch::nn::Linear(cfg.vision.hidden_size, cfg.text.hidden_size));
    language_model = register_module("language_model", LlamaForCausalLM(cfg.text));
  }
  ClipVisionTower vision_tower{nullptr};
  torch::nn::Linear multi_modal_projector{nullptr};
  LlamaForCausalLM language_model{nullptr};
};
TORCH_MODULE(LinearProjectorNet);

ModelShape linear_projector_shape(const LlavaConfig& cfg) {
  ModelShape s = llava_shape(cfg);
  s.architecture = kLinearProjectorArchitecture;
  s.flops.projector = 2 * s.n_visual_tokens * cfg.vision.hidden_size * cfg.text.hidden_size;  // one Linear
  return s;
}

class LinearProjectorModel final : public FamilyModelOf<LlavaConfig, LinearProjectorNet> {
 public:
  LinearProjectorModel(LlavaConfig cfg, LinearProjectorNet net, io::ImagePreprocessConfig pre)
      : FamilyModelOf(cfg, linear_projector_shape(cfg), std::move(net), pre) {}
  at::Tensor preprocess(const cv::Mat& rgb) const override { return io::preprocess_llava(rgb, pre_); }
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) override {
    VisualTokens out = llava_tower_tokens(net_->vision_tower, cfg_, pixels, want_cls_attention);
    out.embeds = net_->multi_modal_projector->forward(out.embeds);
    return out;
  }
  std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const override {
    return llava_prompt_ids(tok, question, cfg_.image_token_index);
  }
};

LlavaConfig parse_config(const nlohmann::json& config) {
  LlavaConfig cfg = llava_config_from_json(config);  // the same fields as LLaVA-1.5 (model_type "llava")
  cfg.validate();
  return cfg;
}

LoadedFamilyModel load(const std::string& dir, const nlohmann::json& config, const RunContext& ctx) {
  const LlavaConfig cfg = parse_config(config);
  auto tok = io::Tokenizer::load((fs::path(dir) / "tokenizer.model").string());
  tok.set_added_tokens(io::load_added_tokens(dir));
  auto net = construct_for_loading<LinearProjectorNet>(cfg, ctx.dtype);
  load_checkpoint_weights(*net, dir, ctx);
  return {std::make_shared<LinearProjectorModel>(cfg, net, load_preprocess(dir, cfg.vision.image_size)), tok};
}

}  // namespace

void register_linear_projector_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    ModelFamily f;
    f.architecture = kLinearProjectorArchitecture;
    f.summary = "test family: LLaVA-1.5 with a one-layer linear projector";
    f.shape = [](const nlohmann::json& config) { return linear_projector_shape(parse_config(config)); };
    f.load = load;
    register_model_family(std::move(f));
  });
}

const std::string& linear_projector_model_dir() {
  return written_once([](const TempDir& dir) {
    register_linear_projector_family();
    const fs::path src = tiny_model_dir(), dst = dir.path() / "linear";
    const auto config = write_tiny_variant(dst, kLinearProjectorArchitecture, "model.safetensors");
    const auto file = io::SafetensorsFile::open((src / "model.safetensors").string());
    std::map<std::string, at::Tensor> tensors;
    for (const auto& [name, info] : file.entries())
      if (name.rfind("multi_modal_projector.", 0) != 0) tensors[name] = file.tensor(name).clone();
    const int64_t dv = config["vision_config"]["hidden_size"], d = config["text_config"]["hidden_size"];
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    tensors["multi_modal_projector.weight"] = at::randn({d, dv}, gen) * 0.05;
    tensors["multi_modal_projector.bias"] = at::randn({d}, gen) * 0.05;
    io::save_safetensors((dst / "model.safetensors").string(), tensors, {{"format", "pt"}});
    return dst.string();
  });
}

}  // namespace vispco::testing
