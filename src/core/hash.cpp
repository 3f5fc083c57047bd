// SHA-256 over OpenSSL's EVP digest interface (libcrypto ≥ 1.1).
#include "core/hash.h"

#include <openssl/evp.h>

#include <array>
#include <fstream>

#include "core/errors.h"

namespace vispco {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  std::string digest;  // empty until finished
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error("SHA-256: OpenSSL EVP_DigestInit_ex failed");
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t n) {
  if (!state_->digest.empty()) throw Error("SHA-256: update() after hex_digest()");
  if (n > 0 && EVP_DigestUpdate(state_->ctx, data, n) != 1) throw Error("SHA-256: EVP_DigestUpdate failed");
}

std::string Sha256::hex_digest() {
  if (state_->digest.empty()) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(state_->ctx, md.data(), &n) != 1)
      throw Error("SHA-256: EVP_DigestFinal_ex failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out(2 * n, '0');
    for (unsigned int i = 0; i < n; ++i) {
      out[2 * i] = kHex[md[i] >> 4];
      out[2 * i + 1] = kHex[md[i] & 15];
    }
    state_->digest = out;
  }
  return state_->digest;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

std::string sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "' for hashing");
  Sha256 h;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("read error while hashing '" + path + "'");
  return h.hex_digest();
}

}  // namespace vispco
