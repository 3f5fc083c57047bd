// SHA-256 content hashes (OpenSSL libcrypto's EVP interface) for dataset manifests and result-store keys.
// Digests are written as 64 lowercase hex characters.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace vispco {

/// Incremental SHA-256 (FIPS 180-4). Feed bytes with update(), read the digest once with hex_digest().
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  /// Appends n bytes. @throws Error when called after hex_digest().
  void update(const void* data, size_t n);
  /// Appends the bytes of a string.
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  /// Finishes the hash: 64 lowercase hex characters. A second call returns the same digest.
  std::string hex_digest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// SHA-256 of a byte string, as 64 lowercase hex characters.
std::string sha256_hex(std::string_view bytes);
/// SHA-256 of a file's bytes, read in 1 MiB chunks. @throws IoError when it cannot be opened or read.
std::string sha256_file_hex(const std::string& path);

}  // namespace vispco
