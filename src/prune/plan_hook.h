// Runs a pruning plan inside the decoder's prefill (the PrefillHook of model/token_state.h): at each stage it
// asks the stage's scorer which visual tokens survive and removes the others physically; text tokens and
// padding always survive. Survivors keep their order and their original RoPE positions; merged tokens take
// the position of their representative patch. Records each stage's scores for heat-maps.
#pragma once
#include <memory>
#include <vector>

#include "model/shape.h"
#include "model/token_state.h"
#include "prune/plan.h"
#include "prune/scorer.h"
#include "prune/selector.h"

namespace vispco {

/// What one stage did, mapped back to the image's patch grid (for heat-maps and reports). The tensors live on
/// the prefill's device (no host copy in the hot path); readers move them where they need them.
struct StageTrace {
  PruneStage stage;
  at::Tensor scores;  ///< [B, N_v] fp32, NaN for tokens already gone before this stage or unscored
  at::Tensor kept;  ///< [B, N_v] bool, true for patches represented after this stage (kept or merge targets)
  bool merged = false;  ///< the stage made new (merged) tokens: `kept` alone does not reproduce it
};

/// A pruning plan bound to a model config; one instance per generate() call (it records traces of the last
/// prefill group). Batches share the plan: every row of a group keeps the same number of tokens, so no
/// padding is introduced.
class PlanHook : public PrefillHook {
 public:
  /// @param env where scorers find their resources (the learned gate's file beside the model).
  /// @throws InvalidArgument when the plan does not fit the model (PruningPlan::validate); what a scorer's
  ///         bind() throws (a missing or mismatched gate file).
  PlanHook(PruningPlan plan, const ModelShape& shape, uint64_t seed = 0, const ScorerEnv& env = {});
  /// A hook over scorers bound already (BoundPlan::hook: nothing is read again).
  /// @param scorers one per stage, from bind_scorers(plan, shape, …). @throws InvalidArgument when the
  ///        counts differ.
  PlanHook(PruningPlan plan, const ModelShape& shape, uint64_t seed,
           std::vector<std::shared_ptr<const Scorer>> scorers);

  bool wants_vision_attention() const override;
  void begin(const at::Tensor& cls_attention, const at::Tensor& vision_keys,
             const VisualLayout& layout) override;
  bool wants_visual_saliency() const override;
  void set_visual_saliency(const at::Tensor& saliency) override;
  bool acts_before(int64_t layer) const override;
  at::Tensor attention_rows(int64_t layer, const TokenState& state) override;
  bool wants_keys(int64_t layer) const override;
  bool apply(int64_t layer, TokenState& state, const LayerSignals& signals) override;

  const PruningPlan& plan() const { return plan_; }
  /// One entry per stage that ran, in order.
  const std::vector<StageTrace>& traces() const { return traces_; }

 private:
  PruningPlan plan_;
  std::vector<PruneStage> stages_;  // plan_'s stages with each keep=P% resolved for this prefill's layout
  std::vector<std::shared_ptr<const Scorer>> scorers_;  // one per stage, shared with a BoundPlan
  std::vector<std::unique_ptr<Selector>> selectors_;    // one per stage: its select= selector, or null
  VisualLayout layout_;  // this prefill's images (begin()); the shape's default until then
  uint64_t seed_ = 0;
  at::Tensor cls_attention_, vision_keys_, saliency_;
  TokenState input_;          // the tokens entering decoder layer 0 (this prefill)
  at::Tensor query_weights_;  // [B, R] of the attention rows asked for the next stage, or undefined
  std::vector<StageTrace> traces_;
};

/// Validates `plan` against the model and binds one scorer per stage to its resources (Scorer::bind): what
/// several hooks of one plan share. @throws what PruningPlan::validate() and the scorers' bind() throw.
std::vector<std::shared_ptr<const Scorer>> bind_scorers(const PruningPlan& plan, const ModelShape& shape,
                                                        const ScorerEnv& env);

}  // namespace vispco
