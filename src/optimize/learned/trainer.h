// The VisPCO search itself (Ji et al., ACL 2026, §3.4, Algorithm 1): train g_φ on the frozen VLM by
// minimising
//   kl_weight · KL(unpruned teacher ‖ soft-pruned student) on answer tokens + Augmented-Lagrangian terms of
//   the per-sample FLOPs equality A(R) = T(b),
// with AdamW on g_φ only, the teacher's answer log-probabilities computed once and cached, the multipliers
// and the penalty updated after every epoch on a validation split, and the stopping rule of
// augmented_lagrangian.h. Data-parallel over a DataParallel group: each process takes its slice of every
// global batch and the gradients are all-reduced, so the result does not depend on how the global batch is
// split.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "model/vlm.h"
#include "optimize/learned/augmented_lagrangian.h"
#include "optimize/learned/batch.h"
#include "optimize/learned/ddp.h"
#include "optimize/learned/flops_constraint.h"
#include "optimize/learned/options.h"
#include "optimize/learned/predictor.h"

namespace vispco::optimize::learned {

/// Keep fractions g_φ predicts for a batch of prompts at given budgets (inference: eval mode, no autograd
/// unless the caller records it). @param budget [B] in [0, 1]. @return [B, L] fp32.
at::Tensor predict_keep_fractions(Predictor& g, const KernelConfig& kernel, const PromptBatch& batch,
                                  const at::Tensor& budget, int64_t n_layers, int64_t first_layer);

/// What one epoch did (the stats struct of a search step; printed by the CLI, written to train_log.jsonl).
struct EpochReport {
  int64_t epoch = 0;       ///< 1-based
  int64_t steps = 0;       ///< optimiser steps in the epoch
  double train_kl = 0;     ///< mean per-sample KL, nats per answer token (this process's samples)
  double train_abs_c = 0;  ///< mean |c| of the training samples (this process)
  double val_abs_c = 0;    ///< mean |c| on the validation split over all training budgets, after the epoch
  double val_mean_c = 0;   ///< mean c there (signed)
  std::vector<double> val_group_c;        ///< mean c per training budget (same order as train_budgets)
  double mu = 0;                          ///< penalty after the update
  double lambda_min = 0, lambda_max = 0;  ///< range of the multipliers after the update
  bool mu_grew = false;                   ///< the update multiplied μ by α
  bool converged = false;                 ///< the stopping rule fired
  double lr = 0;                          ///< learning rate of the epoch's last step
  double seconds = 0;                     ///< wall time of the epoch and its validation
  nlohmann::json to_json() const;
};

/// Result of a whole search.
struct SearchResult {
  std::vector<EpochReport> epochs;
  bool converged = false;  ///< stopped by the rule (else by max_epochs)
  /// Epoch (1-based) whose weights g_φ holds at the end: the lowest validation mean |c| with restore_best,
  /// else the last one.
  int64_t selected_epoch = 0;
  double selected_val_abs_c = 0;  ///< that epoch's validation mean |c|
  double teacher_seconds = 0;     ///< caching the teacher's answer log-probabilities
  double train_seconds = 0;       ///< all epochs
  nlohmann::json to_json() const;
};

/// Trains g_φ for one model. One instance per search; not thread-safe.
class SearchTrainer {
 public:
  /// Builds g_φ (fp32, on the model's device), the datasets and the optimiser. The model must stay alive.
  /// @throws InvalidArgument for bad options or n_train < batch × world size.
  SearchTrainer(VisionLanguageModel& model, SearchOptions opts, DataParallel& ddp);
  ~SearchTrainer();

  /// Caches the teacher (first call), then runs epochs until the stopping rule (after min_epochs) or
  /// max_epochs, then (restore_best) puts back the weights of the epoch with the lowest validation mean |c|.
  /// @param on_epoch called after every epoch on every process.
  SearchResult run(const std::function<void(const EpochReport&)>& on_epoch = {});
  /// One epoch followed by the multiplier update. Caches the teacher first if needed.
  EpochReport epoch();

  Predictor& predictor();
  const AugmentedLagrangian& lagrangian() const;
  const FlopsConstraint& flops() const;
  const SearchOptions& options() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vispco::optimize::learned
