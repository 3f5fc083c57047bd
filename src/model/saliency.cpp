// Gradient saliency of visual tokens: an autograd forward of the unpruned prefill and one backward.
#include "model/saliency.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/errors.h"

namespace vispco {

VisualSaliency visual_token_saliency(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                                     const at::Tensor& visual, bool keep_grad, const VisualLayout& layout) {
  if (reqs.empty()) throw InvalidArgument("visual_token_saliency: empty batch");
  TORCH_CHECK(visual.dim() == 3 && visual.size(0) == static_cast<int64_t>(reqs.size()),
              "visual_token_saliency: visual must be [B, N_v, D] with B = ", reqs.size(), ", got ",
              visual.sizes());
  c10::InferenceMode no_inference(false);  // generate() runs inside InferenceMode; autograd needs it off
  at::AutoGradMode grad_on(true);
  // A normal (non-inference) leaf copy of the visual tokens: inference tensors cannot be saved for backward.
  auto v = visual.detach().clone().requires_grad_(true);
  auto state = build_prefill_state(m, reqs, v, layout);
  KvCache cache(m.shape().n_layers);
  auto& lm = m.language_model();
  auto h = lm->forward(state, cache);
  auto logits = lm->logits(h.narrow(1, h.size(1) - 1, 1)).squeeze(1);  // [B, V] fp32, last prompt position
  auto logp = at::log_softmax(logits, -1);
  auto target = logits.argmax(-1).detach();                      // [B] greedy first answer token
  auto picked = logp.gather(1, target.unsqueeze(1)).squeeze(1);  // [B]
  auto grads = torch::autograd::grad({picked.sum()}, {v}, /*grad_outputs=*/{}, /*retain_graph=*/false);
  auto g = grads[0].detach().to(at::kFloat);  // [B, N_v, D]
  VisualSaliency out;
  out.saliency = g.norm(2, -1);
  if (keep_grad) out.grad = g;
  out.target = target.cpu();
  out.log_prob = picked.detach().cpu();
  return out;
}

}  // namespace vispco
