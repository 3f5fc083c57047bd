// Prune-then-fine-tune (issue 19; the seed's "almost necessary" step, VisionZip §4.3's projector tuning,
// PyramidDrop's training with the drops): adapt a model to one pruning plan by training on fresh SynthVQA
// scenes with the plan applied in the training forward exactly as at inference — the plan's own scorers pick
// the tokens in an inference prefill of each batch's prompts, and the training forward over prompts + answers
// removes the same tokens at the same layers (prune/replay_hook.h), original positions kept — loss on the
// answer tokens, the vision tower frozen. Early stopping on validation accuracy (with the plan), checkpoint
// and resume, and an HF-layout output folder that records the plan it was tuned for.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/progress.h"

namespace vispco::optimize::learned {
class DataParallel;
}

namespace vispco::train {

/// Settings of one fine-tune (a plain value: defaults, validate(), JSON round trip, equality).
struct FinetuneOptions {
  std::string plan;  ///< the pruning plan (canonical text); required, not "none"
  /// What trains: "projector", "projector+decoder", or "decoder-last-N" (the last N decoder layers, N ≥ 1).
  std::string train = "projector";
  int64_t steps = 300;         ///< optimiser steps, ≥ 1 (the most; early stopping may end sooner)
  int64_t batch = 8;           ///< (image, question) pairs per step, ≥ 1
  double lr = 2e-4;            ///< peak learning rate > 0 (linear warm-up, cosine to 10 %)
  double weight_decay = 0.0;   ///< AdamW decoupled weight decay ≥ 0
  double warmup = 0.05;        ///< warm-up fraction of the steps, in [0, 1)
  int64_t val_every = 50;      ///< validate every N steps, ≥ 1 (and at step 0 and at the end)
  int64_t patience = 3;        ///< stop after this many validations without a new best, ≥ 1
  uint64_t seed = 0;           ///< initialisation / shuffling seed
  uint64_t data_seed = 40401;  ///< SynthVQA seed of the training scenes (disjoint from calib/test)
  /// Size of the training-scene pool: scene (step·batch + b) mod train_scenes; 0 = every scene fresh (the
  /// generator makes any number). `vispco finetune --epochs E` sets steps = ⌈E · train_scenes / batch⌉.
  size_t train_scenes = 0;
  double checkpoint_seconds = 120;  ///< checkpoint period, s > 0
  size_t val_limit = 0;             ///< first validation samples used (0 = all)
  size_t test_limit = 0;            ///< first test samples used for the before/after figures (0 = all)
  size_t eval_batch = 8;            ///< samples per generate() call in validation and test
  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const FinetuneOptions&) const = default;
};
nlohmann::json to_json(const FinetuneOptions& o);
/// The SynthVQA scene (index under options.data_seed) of pair `b` ∈ [0, batch) of optimiser step `step` ≥ 0:
/// step·batch + b, mod train_scenes when train_scenes > 0 (a finite pool, revisited every
/// ⌈train_scenes / batch⌉ steps).
uint64_t training_scene(const FinetuneOptions& options, int64_t step, int64_t b);
/// @throws InvalidArgument for unknown keys or bad values.
FinetuneOptions finetune_options_from_json(const nlohmann::json& j);
/// Data parallelism needs a share of every step's batch on each of the `n_ranks` processes.
/// @throws InvalidArgument when batch < n_ranks.
void check_batch_covers_ranks(int64_t batch, int64_t n_ranks);

/// What a fine-tune measured (finetune.json / finetune.md).
struct FinetuneReport {
  FinetuneOptions options;
  std::vector<std::pair<int64_t, double>>
      train_loss;  ///< (step, mean answer-token loss over the last val_every steps)
  /// (step, validation accuracy with the plan, training-batch accuracy proxy = exp(−loss) is not used: the
  /// accuracy of the plan on the last val_every training pairs) per validation.
  struct Check {
    int64_t step = 0;
    double val_accuracy = 0;    ///< validation accuracy with the plan
    double train_accuracy = 0;  ///< accuracy with the plan on the same number of training scenes (greedy)
  };
  std::vector<Check> checks;
  int64_t best_step = 0;
  double best_val_accuracy = 0;
  std::string stopped;  ///< "early stopping after P checks without a new best" | "steps done"
  bool paused = false;  ///< ended by run_finetune's stop_at_step: a checkpoint, nothing else written
  nlohmann::json test = nullptr;  ///< per-family test accuracy before/after, with the plan and unpruned
  int64_t n_trainable = 0;        ///< trainable parameters
  double wall_s = 0;
  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

/// Runs (or resumes, from `out_dir`/checkpoint/) a fine-tune of the model in `model_dir` for options.plan,
/// writes the tuned model (best validation step, bf16) to `out_dir`/model with {"vispco": {"tuned_for_plan":
/// …}} in its config.json (tokenizer, preprocessor config and learned gate copied; the source's model card,
/// plots and K predictor are not: they describe the untuned model), and the report. @param test optional
/// (nullptr: no test figures). @param log one line per step / check. @throws InvalidArgument (options, a plan
/// that merges tokens), IoError. @param progress a progress bar over the optimiser steps (eval/progress.h),
/// on stderr.
/// @param group data parallelism over a launch's c10d Gloo group (issue 50; nullptr or world size 1: one
///        process). Rank r of W trains on scenes [⌊B·r/W⌋, ⌊B·(r+1)/W⌋) of each step's batch of B (B ≥ W),
///        its mean answer-token loss weighted by its share of the batch's answer tokens, so that the averaged
///        gradient (one fp32 all-reduce) is the gradient of the whole batch's mean loss and every rank takes
///        the single-process step (up to float summation order). Rank 0 alone validates (the others wait in
///        the next all-reduce: the group's timeout must exceed a check), decides early stopping (broadcast),
///        and writes the checkpoint, the tuned model and the report; on resume it sends the other ranks its
///        checkpoint's parameters and optimiser state through the group, so they need no copy of `out_dir`.
///        The other ranks return a report with options and n_trainable set, and write nothing; their `val`
///        and `test` are not read (an empty dataset will do).
///        @throws InvalidArgument when B < W; what c10d throws when a collective fails or times out.
/// @param stop_at_step 0, or a step in [1, options.steps): stop after it with a checkpoint and return, the
///        report's `stopped` saying so, without the tuned model or the report files; a later run with the
///        same options resumes there as from a killed run (the learning-rate schedule spans options.steps, so
///        the two runs take the steps one run would). @throws InvalidArgument outside that range.
FinetuneReport run_finetune(const std::string& model_dir, const eval::Dataset& val, const eval::Dataset* test,
                            const FinetuneOptions& options, const std::string& out_dir, int n_threads,
                            const std::function<void(const std::string&)>& log,
                            eval::ProgressMode progress = eval::ProgressMode::kOff,
                            optimize::learned::DataParallel* group = nullptr, int64_t stop_at_step = 0);

}  // namespace vispco::train
