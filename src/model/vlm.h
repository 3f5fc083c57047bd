// A loaded vision-language model of any registered family (model/family.h): the family's half (preprocessing,
// vision tower + projector, prompt template, decoder), the tokenizer and the run context. This is what
// generation, evaluation, the searches and the server hold.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "io/image.h"
#include "io/tokenizer.h"
#include "model/family.h"
#include "model/llama.h"
#include "model/shape.h"

namespace vispco {

struct LlavaConfig;
class LlavaNet;

/// A loaded model. Inference only (autograd off in its methods). Copies share the network.
class VisionLanguageModel {
 public:
  /// Loads the model at `dir` through its family's loader (model/family.h): a Hugging Face folder whose
  /// config.json names a registered architecture, or a llama.cpp GGUF pair (text model + mmproj). Weights
  /// are checked by name and shape, converted to ctx.dtype on ctx.device (used in place, memory-mapped,
  /// when already in that dtype on the CPU).
  /// @throws IoError (missing file), FormatError (corrupt file), ConfigError (unknown architecture, shape
  ///         mismatch, missing tensor — naming the tensor and the folder).
  static VisionLanguageModel load(const std::string& dir, const RunContext& ctx);
  /// A model of a family's network (tests, random-weight models). Puts the network in eval mode, no grads.
  VisionLanguageModel(std::shared_ptr<FamilyModel> family, io::Tokenizer tok, RunContext ctx);
  /// A LLaVA-1.5 model of the given network (random weights, the trainer, tests); model/llava/llava.h.
  VisionLanguageModel(LlavaConfig cfg, LlavaNet net, io::Tokenizer tok, RunContext ctx);

  /// What pruning, evaluation, searches and serving read about this model (model/shape.h).
  const ModelShape& shape() const { return family_->shape(); }
  const io::Tokenizer& tokenizer() const { return tok_; }
  const RunContext& context() const { return ctx_; }
  const io::ImagePreprocessConfig& preprocess_config() const { return family_->preprocess_config(); }
  /// The decoder every family shares (prefill with hooks, decode, KV cache).
  LlamaForCausalLM& language_model() { return family_->language_model(); }
  /// The whole network (quantisation, parameters).
  torch::nn::Module& network() { return family_->network(); }
  /// The family's half, for family-specific code inside model/.
  FamilyModel& family() { return *family_; }

  /// LLaVA-1.5's config and network, for the LLaVA trainer, fine-tuning and tests.
  /// @throws ConfigError when the model is of another family.
  const LlavaConfig& config() const;
  LlavaNet& net();

  /// One RGB image → pixel values [C, S, S] fp32 (the family's preprocessing).
  at::Tensor preprocess(const cv::Mat& rgb) const { return family_->preprocess(rgb); }
  /// Vision tower + projector. @param pixels [B, C, S, S] fp32 (any device) @param want_cls_attention also
  /// return [CLS] attention and keys (VisionZip). @return N_v visual tokens per image (inference tensors).
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention = false);
  /// As encode_images for separately preprocessed images of any shapes (FamilyModel::encode_image_list):
  /// images that make different numbers of tokens come back padded, with VisualTokens::layouts set.
  /// @throws InvalidArgument for an empty list, or sizes the family cannot batch.
  VisualTokens encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention = false);
  /// Prompt ids of a question in the family's template, with one image placeholder.
  std::vector<int64_t> prompt_ids(const std::string& question) const;
  /// Where the visual tokens of a height × width image lie on it (FamilyModel::token_panels).
  std::vector<TokenPanel> token_panels(int64_t height, int64_t width) const {
    return family_->token_panels(height, width);
  }

 private:
  std::shared_ptr<FamilyModel> family_;
  io::Tokenizer tok_;
  RunContext ctx_;
};

}  // namespace vispco
