// evaluate() shared by the ranks of a launch (torchrun, srun, mpirun): rank 0 reads the result store, splits
// the missing samples into work items (chunks of samples) and publishes them in its c10d store; every rank,
// rank 0 included, leases items (work_queue.h), generates them and sends the results back through the
// store; rank 0 alone writes the SQLite store and the output files, then publishes every selected sample's
// result so that each rank returns the same report (a search that goes on from it takes the same steps on
// every rank). Predictions and reports equal a single-process run's: the same selection, batching and
// scoring code (evaluator_steps.h), timings aside. Reference: issue 50.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "eval/distributed/kv_store.h"
#include "eval/evaluator.h"
#include "prune/bound_plan.h"

namespace vispco::eval {

/// How the ranks share a sweep (a plain value: defaults, validate(), equality).
struct SharingOptions {
  /// This process's rank in [0, world_size); rank 0 holds the store and writes the results.
  int64_t rank = 0;
  /// Processes in the launch, ≥ 1.
  int64_t world_size = 1;
  /// Samples per work item, ≥ 1; rounded up to a multiple of EvalOptions::batch_size, so that the items'
  /// batches are the single-process run's batches (the random scorer's draws depend on a sample's place in
  /// its batch).
  size_t chunk = 8;
  /// An item leased by a rank that has not finished it this long after leasing is handed out again, s, > 0.
  /// Longer than the slowest item; a rank that finishes after its lease expired wastes work, never results.
  double lease_timeout_s = 600;
  /// How long a worker waits for rank 0 to publish a sweep's items or its final results, s, > 0.
  double wait_timeout_s = 1800;
  /// Pause between polls of the store when no item is free, s, > 0.
  double poll_s = 0.05;
  /// Test hook: after finishing this many items (≥ 0), lease one more and end the process (exit status 0,
  /// as a worker that vanished) without finishing it; −1 = never.
  int64_t exit_after_items = -1;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const SharingOptions&) const = default;
};

/// A launch's shared sweeps: the store, this rank, and the count of sweeps run so far (every rank runs the
/// same sweeps in the same order, so the n-th sweep of each rank meets the others' under one key prefix).
class WorkSharing {
 public:
  /// @throws InvalidArgument (bad options).
  WorkSharing(KvStore& store, SharingOptions options);
  const SharingOptions& options() const { return options_; }
  KvStore& store() { return store_; }
  bool is_main() const { return options_.rank == 0; }
  /// "[rank r/n] ", the start of every log line of this rank.
  std::string log_prefix() const;
  /// The key prefix of the next sweep ("vispco/<n>/").
  std::string next_prefix();
  /// Rank 0's `value` on every rank: rank 0 publishes it, the others wait for it.
  /// @throws Error when it does not come within wait_timeout_s.
  std::string broadcast(const std::string& value);
  /// Waits for `key` (polling) and returns its value. @throws Error naming `what` after wait_timeout_s.
  std::string wait_for(const std::string& key, const std::string& what);
  /// End of the command: a worker says it is leaving; rank 0 waits for the workers still alive to leave (at
  /// most lease_timeout_s), so that none finds rank 0's store gone while finishing a late item.
  void finish();
  /// Items finished by this rank so far (all sweeps).
  int64_t n_items_done() const { return n_items_done_; }
  /// Called after each item this rank finishes (the test hook).
  void item_done() { ++n_items_done_; }
  /// Rank 0: `prefix`'s published sweep (items, final results) may go once every other rank has read it.
  void retire(const std::string& prefix);
  /// A worker: it has read `prefix`'s final results.
  void read_final(const std::string& prefix);

 private:
  KvStore& store_;
  SharingOptions options_;
  int64_t n_sweeps_ = 0, n_broadcasts_ = 0, n_items_done_ = 0;
  std::vector<std::string> published_;  // rank 0: sweeps whose final results are still in the store
};

/// evaluate() with the work shared (see the file comment); world size 1 runs evaluate() itself. Only rank 0
/// opens options.store_path and writes options.out_dir. Each rank returns the same rows, metrics and counts
/// (n_evaluated and samples_per_s cover the whole sweep; wall_s is each rank's own).
/// @throws what evaluate() throws; Error when the ranks disagree on the run key (a host with other model
///         files or data) or rank 0 does not publish in time.
EvalReport evaluate_shared(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                           const EvalOptions& options, PrefillHook* hook, WorkSharing& sharing);

/// evaluate_shared() with a bound plan (evaluate_plan()'s counterpart: a fresh hook seeded with `seed`,
/// options.plan set to the plan's key).
EvalReport evaluate_plan_shared(VisionLanguageModel& model, const std::string& model_hash,
                                const Dataset& dataset, EvalOptions options, const BoundPlan& plan,
                                WorkSharing& sharing, uint64_t seed = 0);

}  // namespace vispco::eval
