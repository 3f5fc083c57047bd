// The source and CLI paths (see test_paths.h); VISPCO_SOURCE_DIR and VISPCO_CLI_PATH come from CMake.
#include "test_paths.h"

namespace vispco::testing {

const char* source_dir() { return VISPCO_SOURCE_DIR; }
const char* cli_path() { return VISPCO_CLI_PATH; }

}  // namespace vispco::testing
