// `vispco vispco-search`: VisPCO (Ji et al., ACL 2026) as a command of its own — the vispco row of the search
// registry alone, the same flags and run as `vispco optimize --method vispco`
// (optimize/learned/search_vispco.cpp, docs/vispco.md).
#include "cli/commands.h"

namespace vispco::cli {

void register_vispco(CLI::App& app) {
  register_search_alias(
      app, "vispco-search", "vispco",
      "VisPCO (Ji et al., ACL 2026): learn per-layer pruning plans for FLOPs budgets, evaluate the curve");
}

}  // namespace vispco::cli
