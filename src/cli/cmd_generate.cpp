// `vispco generate`: placeholder until implemented.
#include "cli/commands.h"

namespace vispco::cli {
void register_generate(CLI::App& app) { app.add_subcommand("generate", "(not implemented yet)"); }
}  // namespace vispco::cli
