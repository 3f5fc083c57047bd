// A small GGUF writer for tests (the layout of ggml docs/gguf.md and gguf-py's GGUFWriter, written from the
// spec, sharing no code with src/io/gguf.cpp): version 3, metadata in insertion order, tensors aligned to
// `alignment` (general.alignment is written when it is not 32). Tensors are given in PyTorch order and
// written with ne reversed, as gguf-py does. Also the Q8_0 quantiser of ggml (d = max|x| / 127, q =
// round(x/d)).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace vispco::testing {

class GgufWriter {
 public:
  void u32(const std::string& key, uint32_t v) { scalar(key, 4, &v, 4); }
  void i32(const std::string& key, int32_t v) { scalar(key, 5, &v, 4); }
  void f32(const std::string& key, float v) { scalar(key, 6, &v, 4); }
  void boolean(const std::string& key, bool v) {
    uint8_t b = v ? 1 : 0;
    scalar(key, 7, &b, 1);
  }
  void str(const std::string& key, const std::string& v) {
    key_type(key, 8);
    string(kv_, v);
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    key_type(key, 9);
    put32(kv_, 8);
    put64(kv_, v.size());
    for (const auto& s : v) string(kv_, s);
  }
  void floats(const std::string& key, const std::vector<float>& v) { array(key, 6, v.data(), v.size(), 4); }
  void ints(const std::string& key, const std::vector<int32_t>& v) { array(key, 5, v.data(), v.size(), 4); }
  void uints(const std::string& key, const std::vector<uint32_t>& v) { array(key, 4, v.data(), v.size(), 4); }

  /// `t` in PyTorch order, stored as ggml type 0 (F32), 1 (F16), 30 (BF16) or 8 (Q8_0, rows of 32k values).
  void tensor(const std::string& name, const at::Tensor& t, uint32_t ggml_type) {
    auto c = t.detach().cpu().contiguous();
    std::string bytes;
    if (ggml_type == 0)
      bytes = raw(c.to(at::kFloat));
    else if (ggml_type == 1)
      bytes = raw(c.to(at::kHalf));
    else if (ggml_type == 30)
      bytes = raw(c.to(at::kBFloat16));
    else if (ggml_type == 8)
      bytes = q8_0(c.to(at::kFloat));
    else
      throw std::runtime_error("GgufWriter: unsupported type");
    Tensor e{name, c.sizes().vec(), ggml_type, std::move(bytes)};
    tensors_.push_back(std::move(e));
  }
  uint32_t alignment = 32;
  uint32_t version = 3;

  /// The whole file.
  std::string bytes() const {
    std::string out;
    put32(out, 0x46554747);
    put32(out, version);
    put64(out, tensors_.size());
    put64(out, n_kv_ + (alignment != 32 ? 1 : 0));
    out += kv_;
    if (alignment != 32) {
      string(out, "general.alignment");
      put32(out, 4);
      put32(out, alignment);
    }
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      string(out, t.name);
      put32(out, static_cast<uint32_t>(t.shape.size()));
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put64(out, static_cast<uint64_t>(*it));
      put32(out, t.type);
      offsets.push_back(offset);
      put64(out, offset);
      offset = pad(offset + t.data.size());
    }
    out.resize(pad(out.size()), '\0');
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out += tensors_[i].data;
      out.resize(out.size() + (pad(tensors_[i].data.size()) - tensors_[i].data.size()), '\0');
    }
    return out;
  }
  void write(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    const auto b = bytes();
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
  }

  /// ggml's quantize_row_q8_0_ref over `x` (rows of a multiple of 32 values): per block d = amax / 127 stored
  /// as f16, q = round(x / d).
  static std::string q8_0(const at::Tensor& x) {
    auto flat = x.reshape({-1, 32});
    std::string out;
    for (int64_t b = 0; b < flat.size(0); ++b) {
      auto row = flat[b];
      const float amax = row.abs().max().item<float>();
      const float d = amax / 127.f;
      const at::Half dh(d);
      uint16_t bits;
      std::memcpy(&bits, &dh, 2);
      out.append(reinterpret_cast<const char*>(&bits), 2);
      for (int64_t k = 0; k < 32; ++k) {
        const float v = row[k].item<float>();
        out += static_cast<char>(static_cast<int8_t>(d == 0 ? 0 : std::lround(v / d)));
      }
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type;
    std::string data;
  };
  static void put32(std::string& o, uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); }
  static void put64(std::string& o, uint64_t v) { o.append(reinterpret_cast<const char*>(&v), 8); }
  static void string(std::string& o, const std::string& s) {
    put64(o, s.size());
    o += s;
  }
  static std::string raw(const at::Tensor& t) {
    return std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  uint64_t pad(uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }
  void key_type(const std::string& key, uint32_t type) {
    string(kv_, key);
    put32(kv_, type);
    ++n_kv_;
  }
  void scalar(const std::string& key, uint32_t type, const void* v, size_t n) {
    key_type(key, type);
    kv_.append(static_cast<const char*>(v), n);
  }
  void array(const std::string& key, uint32_t type, const void* v, size_t count, size_t size) {
    key_type(key, 9);
    put32(kv_, type);
    put64(kv_, count);
    kv_.append(static_cast<const char*>(v), count * size);
  }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace vispco::testing
