// VisionLanguageModel over a family's half (model/family.h); the LLaVA-specific accessors live in llava.cpp.
#include "model/vlm.h"

#include <c10/core/InferenceMode.h>

namespace vispco {

VisionLanguageModel::VisionLanguageModel(std::shared_ptr<FamilyModel> family, io::Tokenizer tok,
                                         RunContext ctx)
    : family_(std::move(family)), tok_(std::move(tok)), ctx_(ctx) {
  auto& net = family_->network();
  net.eval();
  for (auto& p : net.parameters()) p.set_requires_grad(false);
}

VisionLanguageModel VisionLanguageModel::load(const std::string& dir, const RunContext& ctx) {
  LoadedFamilyModel loaded = load_family_model(dir, ctx);
  return VisionLanguageModel(std::move(loaded.model), std::move(loaded.tokenizer), ctx);
}

VisualTokens VisionLanguageModel::encode_images(const at::Tensor& pixels, bool want_cls_attention) {
  c10::InferenceMode guard;
  return family_->encode_images(pixels.to(ctx_.device, ctx_.dtype), want_cls_attention);
}

VisualTokens VisionLanguageModel::encode_image_list(const std::vector<at::Tensor>& pixels,
                                                    bool want_cls_attention) {
  c10::InferenceMode guard;
  std::vector<at::Tensor> on_device;
  for (const auto& p : pixels) on_device.push_back(p.to(ctx_.device, ctx_.dtype));
  return family_->encode_image_list(on_device, want_cls_attention);
}

std::vector<int64_t> VisionLanguageModel::prompt_ids(const std::string& question) const {
  return family_->prompt_ids(tok_, question);
}

}  // namespace vispco
