// `vispco init-random`: placeholder until implemented.
#include "cli/commands.h"

namespace vispco::cli {
void register_init_random(CLI::App& app) { app.add_subcommand("init-random", "(not implemented yet)"); }
}  // namespace vispco::cli
