// Helpers shared by the tests: unique temporary folders, running the vispco CLI, a tiny model on disk.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "test_paths.h"

namespace vispco::testing {

/// A fresh folder under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vispco_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& child = "") const {
    return (child.empty() ? path_ : path_ / child).string();
  }
  /// path()/name as a string.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// A folder written once per test binary: `write(dir)` fills a temporary folder `dir` that is kept until the
/// process exits and returns the path to hand out, on the first call for this `Write` type (each call site's
/// lambda is its own type, so its own folder); later calls return the same path.
template <class Write>
const std::string& written_once(Write write) {
  static TempDir dir;
  static const std::string path = write(dir);
  return path;
}

/// Result of running a command: exit code, stdout and stderr.
struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

/// Runs `vispco <args>` (the CLI built with this test binary) through the shell; stderr captured separately.
inline CommandResult run_cli(const std::string& args) {
  TempDir tmp;
  const std::string err_file = tmp.str("stderr.txt");
  const std::string cmd = std::string(::vispco::testing::cli_path()) + " " + args + " 2>" + err_file;
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

/// Any non-zero exit code, for expect_one_line_error().
inline constexpr int kAnyFailure = -1;

/// A refused run: exit code `exit_code` (any non-zero one for kAnyFailure), and on stderr one line, prefixed
/// "error: ", containing `needle`, never a LibTorch backtrace.
inline void expect_one_line_error(const CommandResult& r, const std::string& needle,
                                  int exit_code = kAnyFailure) {
  if (exit_code == kAnyFailure)
    EXPECT_NE(r.exit_code, 0) << r.err;
  else
    EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
}

/// Bad input refused (a vispco::Error or an option CLI11 refuses): expect_one_line_error() with exit code 2.
inline void expect_bad_input(const CommandResult& r, const std::string& needle) {
  expect_one_line_error(r, needle, 2);
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

}  // namespace vispco::testing
