// A scorer's declaration that the tokens it keeps depend on the image alone — not on the question, the
// earlier turns, nor the batch a request runs in — so a server may reuse the decoder's KV of a prompt up to
// its image (serve/image_cache.h; BoundPlan::question_independent answers for a whole plan). A separate
// interface, queried with dynamic_cast, so that prune/scorer.h (compiled into ~100 files) stays unchanged.
#pragma once

namespace vispco {

/// Implemented, beside Scorer, by the scorers that may hold question-independent: DivPrune, VisionZip,
/// pool, uniform, base_view (always) and the learned gate (when bound to a gate trained without
/// use_question). A scorer that does not implement it counts as question-dependent: the text-guided ones
/// (FastV, SparseVLM, CDPruner, DART, grad) and random (its draw depends on the batch's shape).
class QuestionIndependent {
 public:
  virtual ~QuestionIndependent() = default;
  /// Whether, as bound (Scorer::bind), the tokens this scorer keeps at ℓ = 0 for an image depend on that
  /// image and the vision tower's signals alone.
  virtual bool question_independent() const = 0;
};

}  // namespace vispco
