// The differentiable keep decision of VisPCO (Ji et al., ACL 2026, §3.2): a soft threshold over the sorted
// scores around rank K (a relaxed, real-valued count), the hard mask "score ≥ threshold" in the forward pass
// and the sigmoid mask's gradient in the backward pass (straight-through estimator, Bengio et al. 2013). Also
// the FastV score the threshold ranks in training: the last prompt token's head-mean attention.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json_fwd.hpp>

namespace vispco::optimize::learned {

/// Settings of the soft threshold (a plain value: defaults, validate(), JSON round trip, equality).
struct SoftThresholdOptions {
  /// Rank window: the threshold is the mean of the sorted scores weighted by exp(−(j − (K − ½))² / width),
  /// j = 0, 1, … the rank. > 0; smaller is sharper but noisier. Release value 5 (centred on j = K there,
  /// which keeps K + 1 tokens; centring on K − ½ keeps K).
  double width = 5.0;
  /// Temperature τ of the soft mask σ((s − θ)/τ), in score units, > 0. Release value 0.1.
  double temperature = 0.1;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const SoftThresholdOptions&) const = default;
};
nlohmann::json to_json(const SoftThresholdOptions& o);
/// @throws InvalidArgument for unknown keys or bad values.
SoftThresholdOptions soft_threshold_options_from_json(const nlohmann::json& j);

/// The masks of one keep decision over N tokens.
struct KeepMask {
  at::Tensor threshold;  ///< [B, 1] fp32 θ, differentiable in the count
  at::Tensor hard;       ///< [B, N] fp32 1 where alive and s ≥ θ, else 0 (no gradient)
  at::Tensor soft;       ///< [B, N] fp32 σ((s − θ)/τ) on alive tokens, 0 on dead ones
  at::Tensor ste;        ///< [B, N] fp32: value of `hard`, gradient of `soft`
};

/// Keep decision for a relaxed count. Tokens not alive are ranked last (their score is replaced by the row's
/// lowest alive score − 1) and are never kept.
/// @param scores [B, N] floating, higher = keep first; treated as constants (no gradient flows into them).
/// @param alive [B, N] bool, at least one per row. @param keep [B] fp32 relaxed count in [0, N] (may require
/// grad).
/// @throws InvalidArgument for mismatched shapes or bad options.
KeepMask soft_keep_mask(const at::Tensor& scores, const at::Tensor& alive, const at::Tensor& keep,
                        const SoftThresholdOptions& opts);

/// FastV's score of the alive visual tokens in the form the threshold ranks (release §3.2): head-mean
/// attention a of the query row, min–max normalised over the alive tokens of the row, then log(a' + 1e−8) ∈
/// [−18.4, 0].
/// @param attn_rows [B, H, 1, T] fp32 attention of the query @param visual_pos [B, N] int64 indices into T
/// @param alive [B, N] bool. @return [B, N] fp32, detached; dead tokens get log(1e−8).
at::Tensor fastv_log_scores(const at::Tensor& attn_rows, const at::Tensor& visual_pos,
                            const at::Tensor& alive);

}  // namespace vispco::optimize::learned
