// Where the tests find the source tree and the built CLI. Defined in one translation unit (test_paths.cpp,
// the only one compiled with the paths), so the other test objects do not depend on the checkout's folder
// and ccache (base_dir) reuses them across clones and worktrees.
#pragma once

namespace vispco::testing {

/// The checkout's root folder (absolute).
const char* source_dir();
/// The built `vispco` executable (absolute).
const char* cli_path();

}  // namespace vispco::testing
