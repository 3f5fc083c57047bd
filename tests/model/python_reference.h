// Running the independent Python references of tests/reference/ (float64 PyTorch, sharing no code with
// vispco) from a test: the interpreter that has torch, and a command's stdout.
#pragma once
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace vispco::testing {

/// Debian's python3 (where python3-torch lives) before whatever python3 is first on PATH; "" when neither
/// imports torch (the reference tests then skip).
inline std::string python_with_torch() {
  for (const char* py : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(py) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}

/// The stdout of a shell command.
inline std::string run_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while (p && (n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  return out;
}

}  // namespace vispco::testing
