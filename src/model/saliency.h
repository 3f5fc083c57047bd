// Gradient saliency of the visual tokens (the seed-described gradient scorer, DESIGN.md §5): one forward and
// one backward pass of the unpruned decoder give |∂ log p(y) / ∂ v_i|, y being the first answer token. At
// inference no answer is known, so y is the model's own greedy prediction after the prompt (as in
// gradient-attribution methods that explain the predicted class, e.g. Simonyan et al. 2014 §3).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/generate.h"
#include "model/vlm.h"

namespace vispco {

/// Result of visual_token_saliency().
struct VisualSaliency {
  at::Tensor saliency;  ///< [B, N_v] fp32: ‖∂ log p(y_b) / ∂ v_{b,i}‖₂ over the hidden dimension D
  at::Tensor grad;      ///< [B, N_v, D] fp32 the gradient itself (only when asked, else undefined)
  at::Tensor target;    ///< [B] int64: y_b, the greedy first answer token of each request
  at::Tensor log_prob;  ///< [B] fp32: log p(y_b) under the unpruned model
};

/// Gradient of each request's log-probability of its greedy first answer token with respect to its visual
/// tokens, through the whole (unpruned) decoder. Rows of a batch are independent (left padding, key masks),
/// so one backward of Σ_b log p(y_b) gives every row's gradient. Runs with autograd on even when called
/// inside an InferenceMode scope (generate()); the model's parameters are not touched and get no .grad. Cost:
/// one prefill forward with autograd plus its backward (≈ 3 unpruned prefills in FLOPs).
/// @param visual [B, N_v, D] projected visual tokens (VisionLanguageModel::encode_images().embeds)
/// @param keep_grad also return the gradient [B, N_v, D] @param layout the images' layout, as for
/// build_prefill_state (n_tokens = 0: the shape's default grid).
/// @throws InvalidArgument for an empty batch or a prompt without its image placeholder.
VisualSaliency visual_token_saliency(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                                     const at::Tensor& visual, bool keep_grad = false,
                                     const VisualLayout& layout = {});

}  // namespace vispco
