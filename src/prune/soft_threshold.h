// The soft-threshold selector of VisPCO (Ji et al., ACL 2026, §3.2): a threshold over the sorted scores
// around rank K (a relaxed, real-valued count) whose hard decision keeps the tokens scoring at or above it,
// trained through with the sigmoid mask's gradient (straight-through estimator, Bengio et al. 2013). relax()
// is that differentiable form, used by VisPCO's training-mode pruning (optimize/learned/soft_prune.h);
// select() is the decision VisPCO's inference plans make at the integer counts its kernel predicts: the top
// K. Registered as select=threshold (prune/selector.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json_fwd.hpp>

#include "prune/selector.h"

namespace vispco {

/// Settings of the soft threshold (a plain value: defaults, validate(), JSON round trip, equality).
struct SoftThresholdOptions {
  /// Rank window: the threshold is the mean of the sorted scores weighted by exp(−(j − (K − ½))² / width),
  /// j = 0, 1, … the rank. > 0; smaller is sharper but noisier. Release value 5 (centred on j = K there,
  /// which keeps K + 1 tokens; centring on K − ½ keeps K).
  double width = 5.0;
  /// Temperature τ of the soft mask σ((s − θ)/τ), in units of threshold_scores(), > 0. Release value 0.1.
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

/// Keep decision for a relaxed count over scores already in threshold units. Tokens not alive are ranked
/// last (their score is replaced by the row's lowest alive score − 1) and are never kept.
/// @param scores [B, N] floating, higher = keep first; treated as constants (no gradient flows into them).
/// @param alive [B, N] bool, at least one per row. @param keep [B] fp32 relaxed count in [0, N] (may require
/// grad).
/// @throws InvalidArgument for mismatched shapes or bad options.
KeepMask soft_keep_mask(const at::Tensor& scores, const at::Tensor& alive, const at::Tensor& keep,
                        const SoftThresholdOptions& opts);

/// A scorer's scores in the units the threshold ranks (VisPCO release §3.2, there for FastV's attention):
/// min–max normalised over the alive tokens of each row, then log(s' + 1e−8) ∈ [−18.4, 0].
/// @param scores [B, N] floating @param alive [B, N] bool. @return [B, N] fp32, detached; dead tokens get
/// log(1e−8).
at::Tensor threshold_scores(const at::Tensor& scores, const at::Tensor& alive);

/// The soft threshold as a selector: select() keeps the top K (inference, integer K); relax() gives the
/// straight-through masks for a relaxed count (training).
class SoftThresholdSelector : public Selector {
 public:
  /// @throws InvalidArgument for bad options.
  explicit SoftThresholdSelector(SoftThresholdOptions opts = {});
  Selection select(const at::Tensor& scores, const ScoreInput& in) const override;
  /// soft_keep_mask(threshold_scores(scores, alive), alive, keep): shapes as there.
  KeepMask relax(const at::Tensor& scores, const at::Tensor& alive, const at::Tensor& keep) const;
  const SoftThresholdOptions& options() const { return opts_; }

 private:
  SoftThresholdOptions opts_;
};

}  // namespace vispco
