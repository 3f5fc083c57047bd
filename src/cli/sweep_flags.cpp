// The shared-sweep flags (cli/sweep_flags.h).
#include "cli/sweep_flags.h"

namespace vispco::cli {

void add_sweep_flags(CLI::App* cmd, optimize::SweepFlags* f) {
  cmd->add_option("--chunk", f->chunk, "Under a launcher: samples per work item handed out by rank 0")
      ->capture_default_str();
  cmd->add_option("--lease-timeout", f->lease_timeout_s,
                  "Under a launcher: seconds after which an unfinished item is handed out again")
      ->capture_default_str();
  cmd->add_option("--dist-timeout", f->dist_timeout_s,
                  "Under a launcher: seconds to wait for the rendezvous at MASTER_ADDR:MASTER_PORT and for "
                  "rank 0")
      ->capture_default_str();
}

}  // namespace vispco::cli
