// The FLOPs ratio of a pruning plan (DESIGN.md §1–2): the token count each decoder layer sees under the plan,
// and the analytic prefill FLOPs (cost/flops.h) summed over the actual prompts of a split, against the same
// prompts unpruned. Used by every search (budget bisection, frontier x-axis, reports).
#pragma once
#include <cstdint>
#include <vector>

#include "model/shape.h"
#include "prune/plan.h"

namespace vispco::optimize {

/// Tokens entering each decoder layer under `plan` for one prompt of `n_text` text tokens (BOS included,
/// image placeholder excluded): layer i sees n_text + K_i, where K_i is the keep of the last stage with
/// layer ≤ i (N_v before the first stage). Plans keep exactly K tokens per stage (merged tokens count in K),
/// so this equals DecoderStats::tokens_per_layer of a batch-1 prefill.
/// @return [L] token counts. @throws InvalidArgument when the plan does not fit `shape` or n_text < 0.
std::vector<int64_t> plan_tokens_per_layer(const PruningPlan& plan, const ModelShape& shape, int64_t n_text);

/// The plan's FLOPs relative to the unpruned model over a set of prompts.
struct FlopsRatio {
  /// Σ_prompts (decoder + LM head at the last position) FLOPs with the plan ÷ the same unpruned: the LLM
  /// prefill ratio that token-pruning papers quote (the vision tower is not pruned). In (0, 1].
  double llm = 1.0;
  /// The same with vision tower and projector added to both sums (end-to-end prefill). In (0, 1].
  double with_vision = 1.0;
  /// Mean prefill FLOPs per prompt with the plan: LLM part and vision + projector part.
  double mean_llm_flops = 0.0, mean_vision_flops = 0.0;
  bool operator==(const FlopsRatio&) const = default;
};

/// FLOPs ratio of `plan` over prompts with the given text lengths (one entry per sample: each sample is
/// costed at its own N_t, and the ratio is of the sums, i.e. of the mean FLOPs per sample).
/// @param n_texts text tokens per prompt, each ≥ 0, at least one.
/// @param images empty (every image at the shape's default size, shape.flops), or one FlopsSpec per prompt
/// (FamilyModel::image_flops of its image: its own N_v and vision FLOPs; models whose images make their own
/// N_v, issue 47): each stage then keeps resolve_keep(stage, that N_v) tokens — a keep ratio of the image's
/// own tokens, a count at most them.
/// @throws InvalidArgument for an empty list, a negative length, images of another count, or a plan that
/// does not fit `shape`.
FlopsRatio plan_flops_ratio(const PruningPlan& plan, const ModelShape& shape,
                            const std::vector<int64_t>& n_texts, const std::vector<FlopsSpec>& images = {});

}  // namespace vispco::optimize
