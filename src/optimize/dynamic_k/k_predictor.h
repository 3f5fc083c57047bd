// Training the per-image K predictor of dynamic K (issue 18): fitting its feature statistics and its ordinal
// cumulative logits (Frank & Hall, ECML 2001; CORAL, Cao et al. 2020) with full-batch AdamW. The network, its
// file and its use at inference are prune/auto_keep/k_predictor.h.
#pragma once
#include <cstdint>
#include <vector>

#include "prune/auto_keep/k_predictor.h"

namespace vispco::optimize {

/// Sets feature_mean / feature_std from training features [n, F] (std floored at 1e-6).
void fit_feature_stats(KPredictor& p, const at::Tensor& features);

/// Training settings (a plain value).
struct KPredictorTraining {
  int64_t steps = 600;         ///< full-batch AdamW steps, ≥ 1
  double lr = 3e-3;            ///< learning rate > 0
  double weight_decay = 1e-3;  ///< AdamW decoupled decay ≥ 0
  uint64_t seed = 0;           ///< seed of the predictor's initial weights (training itself draws nothing)
};
/// Mean binary cross-entropy of the R − 1 cumulative logits against [label > k] over rows with label ≥ 0.
/// @param features [n, F] fp32 @throws InvalidArgument (sizes, a label ≥ R, no labelled row).
double k_predictor_loss(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels);

/// What training did.
struct KTrainingResult {
  double loss_before = 0, loss_after = 0;  ///< training loss at step 0 and at the kept step
  double val_loss = 0;                     ///< validation loss at the kept step (0 without validation)
  int64_t kept_step = 0;                   ///< the step whose weights were kept (last without validation)
};
/// Trains on rows with label ≥ 0 (labels −1 are skipped) with full-batch AdamW on k_predictor_loss, after
/// fitting the feature statistics. With validation rows (val_labels non-empty) the loss there is checked
/// every 10 steps and the weights of the best check are kept (early stopping). @param features [n, F] fp32
/// @throws InvalidArgument (sizes, no labelled row, bad settings).
KTrainingResult train_k_predictor(KPredictor& p, const at::Tensor& features, const std::vector<int>& labels,
                                  const KPredictorTraining& t, const at::Tensor& val_features = {},
                                  const std::vector<int>& val_labels = {});

}  // namespace vispco::optimize
