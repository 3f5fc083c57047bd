// The Qwen2-VL and Qwen2.5-VL families (transformers Qwen2VLForConditionalGeneration,
// Qwen2_5_VLForConditionalGeneration; Hugging Face folders as published): the image at its own aspect ratio
// (smart_resize, model/qwen2_vl/image_processor.h) through the ViT and 2×2 patch merger
// (model/qwen2_vl/vision.h), then the shared Llama-style decoder as Qwen2 (q/k/v biases) with M-RoPE
// positions. Each image makes its own number of visual tokens, N_v = (h/28)·(w/28) for the resized h × w,
// laid on its merged grid; a batch may mix sizes (every image through the tower on its own, no padding inside
// the tower; the decoder prefills each layout as its own group, model/generate.h). Follows transformers
// v4.55's semantics.
#pragma once
#include <torch/nn/module.h>

#include <string>

#include "model/family.h"
#include "model/llama.h"
#include "model/qwen2_vl/config.h"
#include "model/qwen2_vl/image_processor.h"
#include "model/qwen2_vl/vision.h"

namespace vispco {

/// The whole network with parameter names equal to the published checkpoint keys: visual.*, model.* (the
/// decoder stack), lm_head.* (absent when tied); transformers ≥ 4.52's model.visual.* /
/// model.language_model.* load too (qwen2_vl_checkpoint_keys).
struct Qwen2VlNetImpl : torch::nn::Module {
  explicit Qwen2VlNetImpl(const Qwen2VlConfig& cfg);
  /// Also switches the decoder, which is not registered as one child (its parts are, under their keys).
  void train(bool on = true) override;
  Qwen2VisionTransformer visual{nullptr};
  /// The decoder; its `model` and `lm_head` are registered here as "model" and "lm_head".
  LlamaForCausalLM language_model{nullptr};
};
TORCH_MODULE(Qwen2VlNet);

/// Checkpoint keys of a Qwen2VlNet parameter: the published name first, then transformers ≥ 4.52's
/// (visual.X → model.visual.X, model.X → model.language_model.X).
std::vector<std::string> qwen2_vl_checkpoint_keys(const std::string& name);

/// The Qwen2-VL family's half of a loaded model (model/family.h). Its preprocess_config(): mean/std of the
/// processor, image_size 448 (the nominal image of shape(), not a resize target), pad_to_square false.
class Qwen2VlModel final : public FamilyModelOf<Qwen2VlConfig, Qwen2VlNet> {
 public:
  Qwen2VlModel(Qwen2VlConfig cfg, Qwen2VlNet net, QwenImageProcessorConfig processor);
  /// [grid_t, grid_h/2, grid_w/2, 4, C·T·P·P] fp32: the processor's pixel_values rows (merge-blocked order),
  /// viewed so that the image's patch grid travels with them (qwen_preprocess).
  at::Tensor preprocess(const cv::Mat& rgb) const override;
  /// @param pixels [B, grid_t, H/2, W/2, 4, F], images of one size (otherwise use encode_image_list).
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) override;
  /// Each image through the tower on its own: [1, N_v, D] each, rows padded to the longest,
  /// VisualTokens::layouts = (N_v, H/2 rows, W/2 columns). The tower has no [CLS] token: with
  /// want_cls_attention, cls_attention [B, N_max] fp32 is instead the attention each merged token's patches
  /// receive in the last ViT block (head mean, mean over queries, mean over its 4 patches) and keys
  /// [B, N_max, E] that block's pre-rotary keys averaged the same way (Qwen2VisionTransformerImpl::forward's
  /// signal), zero-padded like the embeddings. @throws InvalidArgument for pixels not made by preprocess().
  VisualTokens encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention) override;
  /// One panel: the merged grid over the whole image (the resize keeps the aspect ratio, so no padding).
  std::vector<TokenPanel> token_panels(int64_t height, int64_t width) const override;
  /// The FLOPs of the image as smart_resize sizes it with this folder's min/max pixels
  /// (qwen2_vl_flops_spec at its patch grid).
  FlopsSpec image_flops(int64_t height, int64_t width) const override;
  /// The Instruct chat template with one image then the question (model/qwen2_vl/chat_template.h).
  std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const override;
  const QwenImageProcessorConfig& processor() const { return processor_; }

 private:
  QwenImageProcessorConfig processor_;
};

/// The registry rows: Qwen2-VL (Qwen2VLForConditionalGeneration, model_type qwen2_vl) and Qwen2.5-VL
/// (Qwen2_5_VLForConditionalGeneration, qwen2_5_vl). Folders: config.json, model.safetensors or shards,
/// preprocessor_config.json, tokenizer.json (+ tokenizer_config.json).
ModelFamily qwen2_vl_family();
ModelFamily qwen2_5_vl_family();

/// The shape of a Qwen2-VL config: N_v and grid of the nominal 448 × 448 image (16 × 16 merged tokens; every
/// real image has its own), 3 position axes, FLOPs of that image's tower.
ModelShape qwen2_vl_shape(const Qwen2VlConfig& cfg);

/// FLOPs spec of one image whose resized size gives a grid_h × grid_w patch grid (both multiples of the
/// merge size): N_v = grid_h·grid_w / m², the tower over grid_h·grid_w patches of one temporal patch
/// (qwen_vision_flops: patch embedding, window and full blocks), the merger as the projector, the Qwen2
/// decoder's dimensions. @throws InvalidArgument when the grid is not a positive multiple of m.
FlopsSpec qwen2_vl_flops_spec(const Qwen2VlConfig& cfg, int64_t grid_h, int64_t grid_w);

}  // namespace vispco
