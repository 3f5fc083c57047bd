// Settings of a VisPCO search (Ji et al., ACL 2026, arXiv 2604.15188): what is learnt (kernel, scorer), from
// which data (SynthVQA seeds disjoint from the calib/test splits), how (AdamW on g_φ, KL distillation weight,
// Augmented Lagrangian, soft threshold), and the registry of scorers VisPCO can drive. Every field has its
// default and, where the paper or its release fixes one, the paper's value in its comment.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "optimize/learned/augmented_lagrangian.h"
#include "optimize/learned/flops_constraint.h"
#include "optimize/learned/kernels.h"
#include "prune/soft_threshold.h"

namespace vispco::optimize::learned {

struct SearchOptions;
/// First decoder layer whose input a search may prune: max(1, SearchOptions::first_layer) (the training
/// forward's soft pruning starts after layer 0, whose attention in-LLM scorers read).
int64_t search_first_layer(const SearchOptions& o);

/// The training budgets of the authors' release: 0.01, 0.05, 0.10, …, 0.95.
std::vector<double> release_train_budgets();

/// Everything a search needs besides the model and the process group (a plain value: defaults, validate(),
/// JSON round trip, equality over all fields).
struct SearchOptions {
  /// Registered scorer ranking the tokens, one check_soft_prune_scorer() accepts (fastv, random). The
  /// paper's main setting: FastV.
  std::string scorer = "fastv";
  /// First decoder layer whose input may be pruned, ≥ 0; layers before it keep every token. 0 = the scorer's
  /// earliest, 1 (scoring with layer 0's attention). FastV's paper prunes after layer K = 2 (ℓ = 2
  /// here); the VisPCO release lets the kernel decide from the earliest layer.
  int64_t first_layer = 0;
  KernelConfig kernel;
  SoftThresholdOptions threshold;
  AlOptions al;
  /// Zero of the budget scale (flops_constraint.h). Paper: text (F_min = text tokens only); default scorer.
  BudgetFloor floor = BudgetFloor::kScorer;
  /// Budgets drawn during training, each in [0, 1], at least one, distinct; sample i of epoch e trains at
  /// budget[(i + e) mod n]. Default = the release's 20 values 0.01, 0.05, …, 0.95.
  std::vector<double> train_budgets = release_train_budgets();
  /// SynthVQA seed and size of the training set (≠ calib 20250501 / test 20250502), n ≥ 1.
  uint64_t train_seed = 20250511;
  int64_t n_train = 512;
  /// Seed and size of the validation split for the multiplier updates, n ≥ 1.
  uint64_t val_seed = 20250512;
  int64_t n_val = 64;
  /// Samples per optimiser step and process, ≥ 1 (global batch = batch × world size). Release: 2 × 8 GPUs.
  int64_t batch = 4;
  /// Epochs: at most max_epochs (≥ 1), at least min_epochs (in [1, max_epochs]) before the stopping rule.
  /// The release checks its rule after 5 evaluations.
  int64_t max_epochs = 20;
  int64_t min_epochs = 5;
  /// AdamW learning rate (> 0) and weight decay (≥ 0). Release: 1e-4 and 1e-4 over 1000 epochs of 10k
  /// samples; our runs are far shorter, hence 1e-3.
  double lr = 1e-3;
  double weight_decay = 1e-4;
  /// Learning-rate schedule: linear warm-up over the first `warmup` fraction of max_epochs' steps (in [0,
  /// 1)), then cosine decay to min_lr (in [0, lr]) at the last step of max_epochs. Release: cosine to 1e-6,
  /// warm-up 0.001. Without the decay Adam's steps keep the constraint jittering around the budget.
  double min_lr = 1e-5;
  double warmup = 0.02;
  /// Weight of the KL distillation term, > 0. Release 1000.
  double kl_weight = 1000.0;
  /// Gradient-norm clip, ≥ 0 (0 = off, as the release).
  double clip = 0.0;
  /// Dropout of g_φ in [0, 1). Release 0.1.
  double dropout = 0.1;
  /// Seed of g_φ's initial weights, data order and dropout.
  uint64_t seed = 0;
  /// After the last epoch, put back g_φ's weights from the epoch with the lowest validation mean |c| (the
  /// constraint is the hard requirement; the KL term has no validation estimate). The release keeps the last
  /// epoch's weights (false).
  bool restore_best = true;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const SearchOptions&) const = default;
};
nlohmann::json to_json(const SearchOptions& o);
/// @throws InvalidArgument for unknown keys or bad values.
SearchOptions search_options_from_json(const nlohmann::json& j);

}  // namespace vispco::optimize::learned
