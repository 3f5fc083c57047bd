// LLaVA-1.5 (transformers LlavaForConditionalGeneration): CLIP vision tower → 2-layer MLP projector → Llama
// decoder, loaded from a Hugging Face folder (config.json, model.safetensors[.index.json], tokenizer.model) or
// a llama.cpp GGUF pair (text model + mmproj).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "core/context.h"
#include "io/image.h"
#include "io/tokenizer.h"
#include "model/clip_vision.h"
#include "model/config.h"
#include "model/llama.h"

namespace vispco {

/// multi_modal_projector: linear_1 [D, D_v] → act → linear_2 [D, D].
struct LlavaProjectorImpl : torch::nn::Module {
  explicit LlavaProjectorImpl(const LlavaConfig& cfg);
  /// @param x [B, N_v, D_v] @return [B, N_v, D].
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear linear_1{nullptr}, linear_2{nullptr};
  std::string act;
};
TORCH_MODULE(LlavaProjector);

/// The whole network with parameter names equal to the (older) transformers checkpoint keys:
/// vision_tower.*, multi_modal_projector.*, language_model.model.*, language_model.lm_head.*.
struct LlavaNetImpl : torch::nn::Module {
  explicit LlavaNetImpl(const LlavaConfig& cfg);
  ClipVisionTower vision_tower{nullptr};
  LlavaProjector multi_modal_projector{nullptr};
  LlamaForCausalLM language_model{nullptr};
};
TORCH_MODULE(LlavaNet);

/// Visual tokens of a batch of images, ready for the decoder.
struct VisualTokens {
  at::Tensor embeds;         ///< [B, N_v, D] projected visual tokens, compute dtype
  at::Tensor cls_attention;  ///< [B, N_v] fp32 head-averaged [CLS] attention at the feature layer (when asked)
  at::Tensor keys;           ///< [B, N_v, D_v] feature-layer keys (when asked)
};

/// A loaded LLaVA model: config, network, tokenizer, preprocessing and the run context. Inference only
/// (autograd off in its methods).
class VisionLanguageModel {
 public:
  /// Loads a model named as resolve_model_source() resolves `dir`: a Hugging Face LLaVA folder, or a llama.cpp
  /// GGUF pair (text model + mmproj; model/gguf_llava.h maps it, the chosen vision layer is logged). Tensors are matched by name in either transformers layout
  /// (`language_model.model.layers.N…` or `model.language_model.layers.N…`); shapes are checked against the
  /// config; fp32/fp16/bf16 tensors are converted to ctx.dtype (a stored tensor already in that dtype on the
  /// CPU is used in place: memory-mapped, no second copy).
  /// @throws IoError (missing file), FormatError (corrupt file), ConfigError (unknown architecture, shape
  ///         mismatch, missing tensor — naming the tensor and the folder).
  static VisionLanguageModel load(const std::string& dir, const RunContext& ctx);
  /// A model with the given network (e.g. random weights), for tests and init-random.
  VisionLanguageModel(LlavaConfig cfg, LlavaNet net, io::Tokenizer tok, RunContext ctx);

  const LlavaConfig& config() const { return cfg_; }
  const io::Tokenizer& tokenizer() const { return tok_; }
  const RunContext& context() const { return ctx_; }
  const io::ImagePreprocessConfig& preprocess_config() const { return pre_; }
  LlavaNet& net() { return net_; }

  /// Preprocesses one RGB image to pixel values [3, S, S] fp32 (LLaVA-1.5 pad-to-square + CLIP norm).
  at::Tensor preprocess(const cv::Mat& rgb) const;
  /// Vision tower + projector. @param pixels [B, 3, S, S] fp32 (any device) @param want_cls_attention also
  /// return [CLS] attention and keys (VisionZip). @return N_v visual tokens per image.
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention = false);
  /// Prompt ids of a question in the LLaVA-1.5 template, with one image placeholder.
  std::vector<int64_t> prompt_ids(const std::string& question) const;

 private:
  LlavaConfig cfg_;
  LlavaNet net_;
  io::Tokenizer tok_;
  RunContext ctx_;
  io::ImagePreprocessConfig pre_;
};

/// Writes `net` (parameters cast to `dtype`) as a Hugging Face LLaVA folder: config.json and model.safetensors
/// (older key layout). The tokenizer is not written. @throws IoError.
void save_llava(const std::string& dir, const LlavaConfig& cfg, LlavaNet& net, c10::ScalarType dtype);

}  // namespace vispco
