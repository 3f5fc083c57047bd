// Reading a launcher's rank variables (core/launcher_env.h).
#include "core/launcher_env.h"

#include <optional>

#include "core/errors.h"

namespace vispco {
namespace {

// The variable's value, nullopt when unset or empty.
std::optional<std::string> value_of(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A whole number in [lo, hi] (decimal digits only: no sign, no spaces). @throws InvalidArgument.
int64_t whole_number(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  bool ok = !text.empty() && text.size() <= 9;
  for (char c : text) ok = ok && c >= '0' && c <= '9';
  const int64_t v = ok ? std::stoll(text) : -1;
  if (!ok || v < lo || v > hi)
    throw InvalidArgument("launcher environment: " + name + "='" + text + "' is not a whole number in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

int64_t required(const EnvLookup& env, const char* name, const char* why, int64_t lo, int64_t hi) {
  const auto v = value_of(env, name);
  if (!v) throw InvalidArgument(std::string("launcher environment: ") + name + " is not set (" + why + ")");
  return whole_number(name, *v, lo, hi);
}

constexpr int64_t kMaxProcesses = 1'000'000;

}  // namespace

LauncherEnv read_launcher_env(const EnvLookup& env) {
  struct Names {
    const char *launcher, *rank, *size, *local;
  };
  static const Names kTable[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
  };
  LauncherEnv out;
  for (const Names& n : kTable) {
    if (!value_of(env, n.rank) && !value_of(env, n.size)) continue;
    const std::string why = std::string("set together with ") + (value_of(env, n.rank) ? n.rank : n.size);
    out.launcher = n.launcher;
    out.world_size = required(env, n.size, why.c_str(), 1, kMaxProcesses);
    out.rank = required(env, n.rank, why.c_str(), 0, kMaxProcesses);
    if (out.rank >= out.world_size)
      throw InvalidArgument("launcher environment: " + std::string(n.rank) + "=" + std::to_string(out.rank) +
                            " is outside [0, " + n.size + "=" + std::to_string(out.world_size) + ")");
    if (const auto local = value_of(env, n.local))
      out.local_rank = whole_number(n.local, *local, 0, kMaxProcesses);
    break;
  }
  if (!out.distributed()) return out;
  const std::string why = "needed for " + std::to_string(out.world_size) + " processes: the host of rank 0";
  const auto addr = value_of(env, "MASTER_ADDR");
  if (!addr)
    throw InvalidArgument("launcher environment: MASTER_ADDR is not set (" + why +
                          "; torchrun sets it, under srun/mpirun export it)");
  out.master_addr = *addr;
  out.master_port = required(env, "MASTER_PORT", "the TCP port of rank 0's c10d store", 1, 65535);
  return out;
}

}  // namespace vispco
