// Joining a launch for shared sweeps (optimize/sweep_group.h).
#include "optimize/sweep_group.h"

#include <cstdlib>

#include "core/errors.h"
#include "optimize/learned/ddp.h"
#include "optimize/search_flags.h"

namespace vispco::optimize {

std::unique_ptr<SweepGroup> SweepGroup::join(const LauncherEnv& env, const SweepFlags& flags,
                                             int64_t test_exit_after_items) {
  eval::SharingOptions so;
  if (flags.chunk < 1)
    throw InvalidArgument("--chunk must be ≥ 1 sample, got " + std::to_string(flags.chunk));
  so.chunk = static_cast<size_t>(flags.chunk);
  so.lease_timeout_s = flags.lease_timeout_s;
  so.wait_timeout_s = flags.dist_timeout_s;
  so.rank = env.rank;
  so.world_size = env.world_size;
  so.exit_after_items = test_exit_after_items;
  so.validate();
  if (!(flags.dist_timeout_s > 0))
    throw InvalidArgument("--dist-timeout must be > 0 s, got " + std::to_string(flags.dist_timeout_s));
  if (!env.distributed()) return nullptr;
  std::unique_ptr<SweepGroup> g(new SweepGroup());
  g->env_ = env;
  learned::DdpOptions d;
  d.world_size = env.world_size;
  d.rank = env.rank;
  d.master_addr = env.master_addr;
  d.master_port = env.master_port;
  d.timeout_s = flags.dist_timeout_s;
  g->group_ = std::make_unique<learned::DataParallel>(d);
  g->store_ = g->group_->kv_store();
  g->sharing_ = std::make_unique<eval::WorkSharing>(*g->store_, so);
  return g;
}

SweepGroup::~SweepGroup() = default;

void add_sweep_flags(SearchFlags& flags, SweepFlags* f) {
  flags.option("--chunk", &f->chunk, "Under a launcher: samples per work item handed out by rank 0")
      ->capture_default_str();
  flags
      .option("--lease-timeout", &f->lease_timeout_s,
              "Under a launcher: seconds after which an unfinished item is handed out again")
      ->capture_default_str();
  flags
      .option(
          "--dist-timeout", &f->dist_timeout_s,
          "Under a launcher: seconds to wait for the rendezvous at MASTER_ADDR:MASTER_PORT and for rank 0")
      ->capture_default_str();
}

LaunchFromEnvironment launch_from_environment() {
  LaunchFromEnvironment out;
  out.env = read_launcher_env([](const char* name) { return std::getenv(name); });
  if (const char* hook = std::getenv("VISPCO_TEST_EXIT_AFTER"); hook != nullptr && *hook != '\0') {
    const std::string h = hook;
    const size_t colon = h.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument(h);
      const int64_t rank = std::stoll(h.substr(0, colon)), n = std::stoll(h.substr(colon + 1));
      if (n < 0) throw std::invalid_argument(h);
      if (rank == out.env.rank) out.test_exit_after_items = n;
    } catch (const std::exception&) {
      throw InvalidArgument("VISPCO_TEST_EXIT_AFTER must be RANK:N (e.g. 2:1), got '" + h + "'");
    }
  }
  return out;
}

std::string rank_device(const std::string& device, const LauncherEnv& env) {
  if (device == "cuda" && env.distributed()) return "cuda:" + std::to_string(env.local_rank);
  return device;
}

}  // namespace vispco::optimize
