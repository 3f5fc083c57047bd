// `vispco data`: placeholder until implemented.
#include "cli/commands.h"

namespace vispco::cli {
void register_data(CLI::App& app) { app.add_subcommand("data", "(not implemented yet)"); }
}  // namespace vispco::cli
