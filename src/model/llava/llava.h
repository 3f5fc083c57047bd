// The LLaVA-1.5 family (transformers LlavaForConditionalGeneration): CLIP vision tower → 2-layer MLP
// projector → Llama decoder, loaded from a Hugging Face folder (config.json, model.safetensors[.index.json],
// tokenizer.model) or a llama.cpp GGUF pair (text model + mmproj). Code outside model/ holds it as a
// VisionLanguageModel (model/vlm.h).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "core/context.h"
#include "io/image.h"
#include "io/tokenizer.h"
#include "model/family.h"
#include "model/llama.h"
#include "model/llava/clip_vision.h"
#include "model/llava/config.h"
#include "model/shape.h"
#include "model/vlm.h"

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

/// LLaVA's vision side before the projector: the CLIP tower up to cfg.vision_feature_layer, [CLS] dropped
/// ("default") or kept ("full"). @param pixels [B, C, S, S] on the tower's device and dtype @return embeds =
/// the tower's features [B, N_v, D_v] (not yet projected); with want_cls_attention also the head-averaged
/// [CLS] attention [B, N_v] fp32 and the feature layer's keys [B, N_v, D_v] (VisionZip).
VisualTokens llava_tower_tokens(ClipVisionTower& tower, const LlavaConfig& cfg, const at::Tensor& pixels,
                                bool want_cls_attention);

/// The LLaVA-1.5 family's half of a loaded model (model/family.h): config, network, preprocessing
/// (pad-to-square + CLIP norm), the LLaVA-1.5 conversation template (model/llava_prompt.h).
class LlavaModel final : public FamilyModelOf<LlavaConfig, LlavaNet> {
 public:
  LlavaModel(LlavaConfig cfg, LlavaNet net, io::ImagePreprocessConfig pre);
  at::Tensor preprocess(const cv::Mat& rgb) const override;
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) override;
  std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const override;
};

/// The registry row of LLaVA-1.5 (architecture LlavaForConditionalGeneration, model_type llava): Hugging Face
/// folders (config.json, model.safetensors or shards, tokenizer.model) and llama.cpp GGUF pairs.
ModelFamily llava_family();

/// Writes `net` (parameters cast to `dtype`) as a Hugging Face LLaVA folder: config.json and
/// model.safetensors (older key layout). The tokenizer is not written. @throws IoError.
void save_llava(const std::string& dir, const LlavaConfig& cfg, LlavaNet& net, c10::ScalarType dtype);

}  // namespace vispco
