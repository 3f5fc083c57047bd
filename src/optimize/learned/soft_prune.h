// VisPCO's training-mode pruning inside the frozen decoder (Ji et al., ACL 2026, §3.2): a KeyGateHook that,
// at every layer i from the first prunable one, scores the alive visual tokens with a registered scorer (the
// paper's FastV: the last prompt token's attention at layer i−1, as at inference), keeps the relaxed count
// K_i = N_v·R_i with the soft-threshold selector's straight-through mask (prune/soft_threshold.h), and gates
// the others off as keys from layer i on. Masks compose across layers: a token gated off stays off. Text
// tokens and padding are never gated.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/token_state.h"
#include "prune/scorer.h"
#include "prune/soft_threshold.h"

namespace vispco::optimize::learned {

/// Whether VisPCO can train with the registered scorer `name`: it gives per-token scores
/// (Scorer::provides_scores), acts inside the LLM, reads only the prompt (ScorerNeeds::prompt_only) and no
/// signal besides attention rows (no vision attention, keys or saliency). FastV and random qualify.
/// @throws InvalidArgument for an unknown scorer or one that does not qualify, listing those that do.
void check_soft_prune_scorer(const std::string& name);

/// One training forward's pruning decisions. One instance per forward.
class SoftPruneHook : public KeyGateHook {
 public:
  /// @param fractions [B, L] fp32 keep fractions R (requires grad in training); layers before first_layer are
  ///        not pruned. @param visual_pos [B, N_v] int64 indices into T of the visual tokens.
  /// @param query_pos [B] int64 index into T of each row's last prompt token (the scoring query).
  /// @param first_layer first layer whose input is pruned, ≥ 1 (scorers read layer i−1's attention).
  /// @param scorer a scorer check_soft_prune_scorer() accepts, named `scorer_name` (outlives the hook).
  /// @param selector the soft threshold (outlives the hook). @param seed ScoreInput::seed (random scorer).
  /// @throws InvalidArgument for mismatched shapes or first_layer < 1.
  SoftPruneHook(at::Tensor fractions, at::Tensor visual_pos, at::Tensor query_pos, int64_t first_layer,
                const Scorer& scorer, std::string scorer_name, const SoftThresholdSelector& selector,
                uint64_t seed = 0);

  at::Tensor attention_rows(int64_t layer, const TokenState& state) const override;
  at::Tensor gate(int64_t layer, const TokenState& state, const at::Tensor& attn_rows) override;

  /// Visual tokens kept by the hard masks entering each layer, [B, L] int64 (N_v before first_layer).
  at::Tensor hard_counts() const;

 private:
  // What the scorer sees before layer `layer`: the visual tokens, the query row, the stage.
  ScoreInput score_input(int64_t layer, const TokenState& state, const PruneStage& stage) const;

  at::Tensor fractions_, visual_pos_, query_pos_;
  int64_t first_ = 1, n_visual_ = 0;
  const Scorer* scorer_;
  std::string scorer_name_;
  const SoftThresholdSelector* selector_;
  uint64_t seed_ = 0;
  at::Tensor mask_;                 // [B, N_v] fp32 composed STE mask, undefined before the first pruning
  at::Tensor alive_;                // [B, N_v] bool
  std::vector<at::Tensor> counts_;  // per layer [B] int64
};

}  // namespace vispco::optimize::learned
