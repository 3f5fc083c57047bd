// Who this process is in a multi-process launch, read from the variables the launchers set: PyTorch's
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; torch/distributed/run.py), Slurm's srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE,
// _LOCAL_RANK); for the last two MASTER_ADDR/MASTER_PORT still come from the environment. None set → one
// process, as before. The lookup is passed in, so nothing below main reads the environment itself.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace vispco {

/// This process's place in a launch (a plain value).
struct LauncherEnv {
  /// Which launcher's variables were read: "torchrun", "slurm", "openmpi", or "" (none: one process).
  std::string launcher;
  /// Global rank in [0, world_size).
  int64_t rank = 0;
  /// Processes in the launch, ≥ 1.
  int64_t world_size = 1;
  /// Rank among the processes of this host, ≥ 0 (picks the GPU: cuda:local_rank).
  int64_t local_rank = 0;
  /// Host of rank 0's c10d TCPStore ("" for one process).
  std::string master_addr;
  /// Its TCP port, in [1, 65535] (0 for one process).
  int64_t master_port = 0;

  /// More than one process.
  bool distributed() const { return world_size > 1; }
  bool operator==(const LauncherEnv&) const = default;
};

/// Returns the value of an environment variable, or nullptr when it is unset (e.g. std::getenv).
using EnvLookup = std::function<const char*(const char*)>;

/// Reads the launch from `env`: torchrun's variables when RANK or WORLD_SIZE is set, else Slurm's when
/// SLURM_PROCID is set, else Open MPI's when OMPI_COMM_WORLD_RANK is set, else one process. A world of
/// more than one process needs MASTER_ADDR and MASTER_PORT. An empty variable counts as unset.
/// @throws InvalidArgument, one line naming the variable and its value: not a whole number, rank outside
///         [0, world size), world size < 1, a missing partner variable, port outside [1, 65535].
LauncherEnv read_launcher_env(const EnvLookup& env);

}  // namespace vispco
