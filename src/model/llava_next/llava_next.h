// The LLaVA-NeXT family (transformers LlavaNextForConditionalGeneration, llava-hf/llava-v1.6-* folders):
// AnyRes tiles (model/llava_next/image_processor.h) through LLaVA's CLIP tower and 2-layer MLP projector,
// packed with image_newline (model/llava_next/pack.h), then the shared Llama decoder. Each image makes its
// own number of visual tokens (anyres.h AnyresGeometry::layout); a batch may mix them. Follows transformers
// v4.52's semantics.
//
// Newline tokens: they are visual tokens like the others — counted in N_v, scored by every scorer and kept
// or dropped by the plan — because they sit inside the image's span, which is what pruning inside the LLM
// sees (as transformers hands the decoder the packed sequence), and positions stay original, so a dropped
// newline's row boundary is still marked by the position gap. The vision tower never saw them: before the
// LLM their [CLS] attention is 0 (never a "dominant" token) and their keys are zero vectors.
#pragma once
#include <torch/nn/module.h>

#include <string>

#include "io/image.h"
#include "model/family.h"
#include "model/llama.h"
#include "model/llava/clip_vision.h"
#include "model/llava/llava.h"
#include "model/llava_next/config.h"
#include "model/shape.h"

namespace vispco {

/// The whole network with parameter names equal to the (older) transformers checkpoint keys:
/// vision_tower.*, multi_modal_projector.*, image_newline, language_model.model.*, language_model.lm_head.*
/// (transformers ≥ 4.52's model.* names load too, model/weights.h).
struct LlavaNextNetImpl : torch::nn::Module {
  explicit LlavaNextNetImpl(const LlavaNextConfig& cfg);
  ClipVisionTower vision_tower{nullptr};
  LlavaProjector multi_modal_projector{nullptr};
  LlamaForCausalLM language_model{nullptr};
  at::Tensor image_newline;  ///< [D], appended after each row of the tiles' features
};
TORCH_MODULE(LlavaNextNet);

/// The LLaVA-NeXT family's half of a loaded model (model/family.h).
/// Its preprocess_config(): image_size is the tile side; mean/std from preprocessor_config.json;
/// pad_to_square is false.
class LlavaNextModel final : public FamilyModelOf<LlavaNextConfig, LlavaNextNet> {
 public:
  LlavaNextModel(LlavaNextConfig cfg, LlavaNextNet net, io::ImagePreprocessConfig pre);
  /// [1 + T + 1, 3, S, S] fp32: the base image, T tiles, the image-size slice (anyres_preprocess).
  at::Tensor preprocess(const cv::Mat& rgb) const override;
  /// @param pixels [B, 1 + T + 1, 3, S, S], images of one tile count (otherwise use encode_image_list).
  VisualTokens encode_images(const at::Tensor& pixels, bool want_cls_attention) override;
  /// Each image through the tower on its own (1 + T pictures), projected and packed; rows padded to the
  /// longest, VisualTokens::layouts set. @throws InvalidArgument for pixels not made by preprocess().
  VisualTokens encode_image_list(const std::vector<at::Tensor>& pixels, bool want_cls_attention) override;
  /// Two panels: the base view (n × n over the whole image, drawn square, as the tower saw it squashed), then
  /// the unpadded high-resolution grid (rows × cols, a newline token after each row) over the image, with the
  /// tile boundaries as lines.
  std::vector<TokenPanel> token_panels(int64_t height, int64_t width) const override;
  /// The image's own AnyRes geometry: N_v = n² + rows·(cols + 1), the tower and projector over the base view
  /// and each of its tiles (llava_next_image_flops).
  FlopsSpec image_flops(int64_t height, int64_t width) const override;
  /// LLaVA-v1.6-vicuna's template, the same as LLaVA-1.5's (model/llava/llava_prompt.h).
  std::vector<int64_t> prompt_ids(const io::Tokenizer& tok, const std::string& question) const override;

 private:
  VisualTokens encode_one(const at::Tensor& pixels, bool want_cls_attention);
};

/// The registry row of LLaVA-NeXT (architecture LlavaNextForConditionalGeneration, model_type llava_next):
/// Hugging Face folders (config.json, model.safetensors or shards, tokenizer.model).
ModelFamily llava_next_family();

/// Writes `net` (parameters cast to `dtype`) as a Hugging Face LLaVA-NeXT folder: config.json and
/// model.safetensors (older key layout). @throws IoError.
void save_llava_next(const std::string& dir, const LlavaNextConfig& cfg, LlavaNextNet& net,
                     c10::ScalarType dtype);

}  // namespace vispco
