// The eval tests' names for the shared test helpers (tests/test_util.h).
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace vispco::test {

using TempDir = vispco::testing::TempDir;

/// Writes bytes to a file (creating parent folders).
inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace vispco::test
