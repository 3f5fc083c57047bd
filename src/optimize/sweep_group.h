// Joining a launch for shared sweeps (issue 50): the launcher's variables (core/launcher_env.h) → the c10d
// process group VisPCO's training already uses (optimize/learned/ddp.h: TCPStore on rank 0, Gloo) → the
// store as work sharing for eval::evaluate_shared(). One process (no launcher variables) joins nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/launcher_env.h"
#include "eval/distributed/shared_eval.h"

namespace vispco::optimize {

namespace learned {
class DataParallel;
}
class SearchFlags;

/// The command-line settings of shared sweeps (flags --chunk, --lease-timeout, --dist-timeout).
struct SweepFlags {
  /// Samples per work item, ≥ 1.
  int64_t chunk = 8;
  /// A leased item not finished this long after leasing is handed out again, s, > 0.
  double lease_timeout_s = 600;
  /// Rendezvous (all ranks connected to rank 0's store) and waits for rank 0's items, s, > 0.
  double dist_timeout_s = 600;
};

/// This process's membership of a launch: the c10d group and the work sharing over its store.
class SweepGroup {
 public:
  /// Joins the launch `env` describes (rank 0 starts the TCPStore at MASTER_ADDR:MASTER_PORT and waits for
  /// every rank). nullptr when env is one process.
  /// @param test_exit_after_items SharingOptions::exit_after_items for this rank (tests), −1 = never
  /// @throws InvalidArgument (bad flags), Error (rendezvous failed or timed out: one line with the address).
  static std::unique_ptr<SweepGroup> join(const LauncherEnv& env, const SweepFlags& flags,
                                          int64_t test_exit_after_items = -1);
  ~SweepGroup();
  eval::WorkSharing& sharing() { return *sharing_; }
  /// The launch's c10d process group (Gloo over rank 0's TCPStore), for collectives: data-parallel gradients
  /// (`vispco finetune`). The sweeps themselves use only its store.
  learned::DataParallel& group() { return *group_; }
  const LauncherEnv& env() const { return env_; }

 private:
  SweepGroup() = default;
  LauncherEnv env_;
  std::unique_ptr<learned::DataParallel> group_;
  std::unique_ptr<eval::KvStore> store_;
  std::unique_ptr<eval::WorkSharing> sharing_;
};

/// Declares --chunk, --lease-timeout and --dist-timeout on a search command (optimize/search_flags.h), bound
/// to `*f`; the same help text for every method that declares them (docs/distributed.md).
void add_sweep_flags(SearchFlags& flags, SweepFlags* f);

/// The launch this process belongs to, from the process environment, and the test hook
/// VISPCO_TEST_EXIT_AFTER="RANK:N" (that rank ends itself after N ≥ 0 items, holding the next one's lease).
/// Called by the commands' front ends only. @throws InvalidArgument (malformed variables, one line).
struct LaunchFromEnvironment {
  LauncherEnv env;
  int64_t test_exit_after_items = -1;
};
LaunchFromEnvironment launch_from_environment();

/// The device of this rank: "cuda" becomes "cuda:LOCAL_RANK" in a launch (one process per GPU); anything
/// else is returned unchanged.
std::string rank_device(const std::string& device, const LauncherEnv& env);

}  // namespace vispco::optimize
