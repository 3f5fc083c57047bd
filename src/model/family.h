// The model-family seam (issue 44): the one place that knows which vision-language model families exist.
// A family is one row of the registry (ModelFamily): it reads its config into a ModelShape (model/shape.h)
// and loads its network as a FamilyModel (preprocessing, visual tokens, prompt template, the decoder). Code
// outside model/ reads the shape and calls VisionLanguageModel (model/vlm.h); it never names a family's
// config type. The anchors are vLLM's model registry (architecture name → class) and llama.cpp's
// tools/mtmd (one projector type per family).
#pragma once
#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "io/image.h"
#include "io/tokenizer.h"
#include "model/llama.h"
#include "model/shape.h"
#include "model/token_panels.h"
#include "model/visual_tokens.h"

namespace cv {
class Mat;
}

namespace vispco {

struct ModelSource;

/// The family-specific half of a loaded model. VisionLanguageModel (model/vlm.h) owns one and adds the
/// tokenizer and the run context; every family shares the Llama-style decoder (model/llama.h).
class FamilyModel {
 public:
  virtual ~FamilyModel() = default;
  /// What code outside model/ reads about this model.
  virtual const ModelShape& shape() const = 0;
  /// One RGB image → its pixel values, fp32, for encode_image_list: [C, S, S] for a fixed-size family (the
  /// family's resize, pad and norm); a dynamic-resolution or tiling family defines its own shape.
  virtual at::Tensor preprocess(const cv::Mat& rgb) const = 0;
  /// The preprocessing settings (size, mean/std, padding), for request checks and reports.
  virtual const io::ImagePreprocessConfig& preprocess_config() const = 0;
  /// Vision tower + projector. @param pixels [B, C, S, S] already on the model's device in its compute dtype
  /// @param want_cls_attention also return [CLS] attention and keys (VisionZip); a family without them
  /// leaves those undefined. @return N_v visual tokens per image. Called in inference mode.
  virtual VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) = 0;
  /// As encode_images for images preprocessed separately, whose pixel tensors may differ in shape (dynamic
  /// resolution, tiles); a family whose images make different numbers of tokens sets VisualTokens::layouts.
  /// Default: stacks the tensors (equal shapes) and calls encode_images.
  virtual VisualTokens encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention);
  /// Where the tokens of a height × width image lie on it (token heat-maps). Default: square_token_panel()
  /// over the shape's grid with preprocess_config()'s padding.
  virtual std::vector<TokenPanel> token_panels(int64_t height, int64_t width) const;
  /// The FLOPs spec (cost/flops.h) of one height × width image as this family processes it: its N_v, the
  /// tower's patch embedding and layers over every view or patch it makes, the projector or merger, and the
  /// decoder's dimensions. Default: shape().flops (a fixed-size family: every image is resized alike).
  /// @throws InvalidArgument for a non-positive size.
  virtual FlopsSpec image_flops(int64_t height, int64_t width) const;
  /// Prompt ids of a question in the family's chat template, holding shape().image_token_id once.
  /// @throws InvalidArgument when the tokenizer cannot express the template.
  virtual std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const = 0;
  /// The decoder (prefill with pruning hooks, decode, KV cache).
  virtual LlamaForCausalLM& language_model() = 0;
  /// The whole network (for eval(), parameters and quantisation).
  virtual torch::nn::Module& network() = 0;
};

/// The state most families' FamilyModel keeps, with the overrides and accessors that only return it: the
/// config (`Config`), its ModelShape, the network (`Net`, a TORCH_MODULE holder whose module has a
/// `language_model`) and the preprocessing settings. A family derives from it and adds preprocess(),
/// encode_images() and prompt_ids().
template <class Config, class Net>
class FamilyModelOf : public FamilyModel {
 public:
  const ModelShape& shape() const override { return shape_; }
  const io::ImagePreprocessConfig& preprocess_config() const override { return pre_; }
  LlamaForCausalLM& language_model() override { return net_->language_model; }
  torch::nn::Module& network() override { return *net_; }
  const Config& config() const { return cfg_; }
  Net& net() { return net_; }

 protected:
  FamilyModelOf(Config cfg, ModelShape shape, Net net, io::ImagePreprocessConfig pre)
      : cfg_(std::move(cfg)), shape_(std::move(shape)), net_(std::move(net)), pre_(std::move(pre)) {}

  Config cfg_;
  ModelShape shape_;
  Net net_;
  io::ImagePreprocessConfig pre_;
};

/// A family's model and tokenizer as its loader returns them.
struct LoadedFamilyModel {
  std::shared_ptr<FamilyModel> model;
  io::Tokenizer tokenizer;
};

/// One row of the family registry.
struct ModelFamily {
  /// Hugging Face architecture name (config.json "architectures"[0]), e.g. "LlavaForConditionalGeneration".
  std::string architecture;
  /// config.json "model_type" that selects this family when "architectures" is absent ("" = never).
  std::string model_type;
  /// One line for `--help` texts and error messages.
  std::string summary;
  /// Shape from a parsed config.json (cheap: no weights). @throws ConfigError naming the bad field.
  std::function<ModelShape(const nlohmann::json& config)> shape;
  /// Loads a Hugging Face folder whose config.json is `config`, weights in ctx.dtype on ctx.device.
  /// @throws IoError, FormatError, ConfigError.
  std::function<LoadedFamilyModel(const std::string& dir, const nlohmann::json& config,
                                  const RunContext& ctx)>
      load;
  /// Optional: the shape and the loader of a llama.cpp GGUF pair of this family.
  std::function<ModelShape(const ModelSource& src)> gguf_shape;
  std::function<LoadedFamilyModel(const ModelSource& src, const RunContext& ctx)> load_gguf;
};

/// The registered families, built-in ones first (today: LLaVA-1.5, LLaVA-NeXT).
const std::deque<ModelFamily>& model_families();

/// Adds a family (tests add deliberately small ones). @throws InvalidArgument when its architecture is
/// already registered or shape/load are missing.
void register_model_family(ModelFamily family);

/// The family of a parsed config.json: by "architectures"[0], else by "model_type".
/// @param where the file, for messages. @throws ConfigError listing the registered architectures.
const ModelFamily& family_for_config(const nlohmann::json& config, const std::string& where);

/// The shape of the model at `dir` (a Hugging Face folder or a GGUF pair, as resolve_model_source() resolves
/// it), read from its config only: cheap, builds no weights, so plans can be checked before a slow load.
/// @throws IoError (no such folder, unreadable file), FormatError (bad JSON), ConfigError (unknown
///         architecture or a bad field).
ModelShape load_model_shape(const std::string& dir);

/// The plan a model folder was fine-tuned for (config.json "vispco"."tuned_for_plan", written by `vispco
/// finetune`), or "" when none (also when config.json is missing or unreadable: loading the model reports
/// that). The CLI and the server run it when no --plan is given.
std::string tuned_plan_of(const std::string& model_dir);

/// Loads the model at `dir` through its family's loader (VisionLanguageModel::load calls this).
/// @throws as load_model_shape, plus the loader's errors (missing or mis-shaped tensor, tokenizer).
LoadedFamilyModel load_family_model(const std::string& dir, const RunContext& ctx);

}  // namespace vispco
