// The shared-sweep flags of the commands that run under a launcher (eval, scorer-table; the plan searches
// declare theirs through optimize/search_flags.h): --chunk, --lease-timeout, --dist-timeout.
#pragma once
#include <CLI/CLI.hpp>

#include "optimize/sweep_group.h"

namespace vispco::cli {

/// Declares --chunk, --lease-timeout and --dist-timeout on `cmd`, bound to `*f` (docs/distributed.md).
void add_sweep_flags(CLI::App* cmd, optimize::SweepFlags* f);

}  // namespace vispco::cli
