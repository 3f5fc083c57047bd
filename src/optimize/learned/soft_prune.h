// VisPCO's training-mode pruning inside the frozen decoder (Ji et al., ACL 2026, §3.2): a KeyGateHook that,
// at every layer i from the first prunable one, ranks the alive visual tokens by FastV's score (the last
// prompt token's attention at layer i−1, as at inference), keeps the relaxed count K_i = N_v·R_i with the
// straight- through mask of ste.h, and gates the others off as keys from layer i on. Masks compose across
// layers: a token gated off stays off. Text tokens and padding are never gated.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/token_state.h"
#include "optimize/learned/ste.h"

namespace vispco::optimize::learned {

/// One training forward's pruning decisions. One instance per forward.
class SoftPruneHook : public KeyGateHook {
 public:
  /// @param fractions [B, L] fp32 keep fractions R (requires grad in training); layers before first_layer are
  ///        not pruned. @param visual_pos [B, N_v] int64 indices into T of the visual tokens.
  /// @param query_pos [B] int64 index into T of each row's last prompt token (the scoring query).
  /// @param first_layer first layer whose input is pruned, ≥ 1 (FastV needs layer i−1's attention).
  /// @throws InvalidArgument for mismatched shapes or first_layer < 1.
  SoftPruneHook(at::Tensor fractions, at::Tensor visual_pos, at::Tensor query_pos, int64_t first_layer,
                SoftThresholdOptions opts);

  at::Tensor attention_rows(int64_t layer, const TokenState& state) const override;
  at::Tensor gate(int64_t layer, const TokenState& state, const at::Tensor& attn_rows) override;

  /// Visual tokens kept by the hard masks entering each layer, [B, L] int64 (N_v before first_layer).
  at::Tensor hard_counts() const;

 private:
  at::Tensor fractions_, visual_pos_, query_pos_;
  int64_t first_ = 1, n_visual_ = 0;
  SoftThresholdOptions opts_;
  at::Tensor mask_;                 // [B, N_v] fp32 composed STE mask, undefined before the first pruning
  at::Tensor alive_;                // [B, N_v] bool
  std::vector<at::Tensor> counts_;  // per layer [B] int64
};

}  // namespace vispco::optimize::learned
