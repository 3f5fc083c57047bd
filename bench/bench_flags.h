// The benchmark programs' own "--name=value" flags, read after Google Benchmark has taken its own.
#pragma once
#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace vispco::bench {

/// One flag: its name ("--preset") and what to do with its value (may throw on a bad value).
struct BenchFlag {
  const char* name;
  std::function<void(const std::string& value)> set;
};

/// Applies argv[1..] ("--name=value"; "--name" alone gives "") to `flags`. Returns false, after printing
/// why, on an unknown flag ("unknown flag '…' (own flags: <own_flags>)") or a value its setter refuses.
inline bool parse_bench_flags(int argc, char** argv, const std::vector<BenchFlag>& flags,
                              const char* own_flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    const auto f =
        std::find_if(flags.begin(), flags.end(), [&](const BenchFlag& b) { return key == b.name; });
    if (f == flags.end()) {
      std::fprintf(stderr, "unknown flag '%s' (own flags: %s)\n", a.c_str(), own_flags);
      return false;
    }
    try {
      f->set(value);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bad value in '%s': %s\n", a.c_str(), e.what());
      return false;
    }
  }
  return true;
}

}  // namespace vispco::bench
