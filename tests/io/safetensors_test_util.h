// Helpers of the safetensors tests: a unique temp folder per test, raw file bytes built by hand (no code of
// the reader or writer involved), and a look at /proc/self/maps to see which file a pointer is mapped from.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace vispco::io::st_test {

namespace fs = std::filesystem;

/// A fresh folder under the system temp dir, named after the running test; removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = std::string("vispco_") + info->test_suite_name() + "_" + info->name() + "_" +
                             std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    path_ = fs::temp_directory_path() / name;
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Path of `file` inside the folder.
  std::string operator/(const std::string& file) const { return (path_ / file).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `n` as 8 little-endian bytes, by shifts (independent of the host byte order).
inline std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xFF);
  return out;
}

/// A safetensors file by hand: 8-byte length of `header` (as given, no padding added), `header`, `data`.
inline std::string st_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

/// `header` padded with spaces to a multiple of 8 bytes, so the data section starts 8-byte aligned.
inline std::string pad8(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

/// Number of mappings in /proc/self/maps whose file is `path` (compared after canonicalisation), and
/// whether `ptr` lies inside one of them.
struct MapsLookup {
  int n_mappings = 0;
  bool contains_ptr = false;
};
inline MapsLookup lookup_maps(const std::string& path, const void* ptr = nullptr) {
  const std::string want = fs::canonical(path).string();
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  MapsLookup out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, file;
    fields >> range >> perms >> offset >> dev >> inode;
    std::getline(fields >> std::ws, file);
    if (file != want) continue;
    ++out.n_mappings;
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (ptr != nullptr && addr >= lo && addr < hi) out.contains_ptr = true;
  }
  return out;
}

/// Resident kB of this process's mappings of file `path` ("Rss:" lines of /proc/self/smaps).
inline int64_t mapped_rss_kb(const std::string& path) {
  const std::string want = fs::canonical(path).string();
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  int64_t kb = 0;
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos) {  // a mapping's header
      std::string perms, offset, dev, inode, file;
      fields >> perms >> offset >> dev >> inode;
      std::getline(fields >> std::ws, file);
      in_file = file == want;
    } else if (in_file && first == "Rss:") {
      int64_t v = 0;
      fields >> v;
      kb += v;
    }
  }
  return kb;
}

/// Asserts `fn` throws `E` whose message is one line, names `path` and contains every one of `parts`.
template <typename E, typename Fn>
void expect_error(Fn&& fn, const std::string& path, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception naming " << path;
  } catch (const E& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name " << path << ": " << msg;
    for (const auto& part : parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "no '" << part << "' in: " << msg;
  }
}

}  // namespace vispco::io::st_test
