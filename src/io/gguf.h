// Reader of llama.cpp's GGUF format (ggml docs/gguf.md, versions 2 and 3): magic "GGUF", uint32 version,
// uint64 tensor count, uint64 metadata count; metadata {gguf string key, uint32 value type, value}; tensor
// infos {name, uint32 n_dims ≤ 4, uint64 ne[n_dims] (innermost first), uint32 ggml type, uint64 offset};
// padding to `general.alignment` (default 32); then the tensor data, each tensor at an aligned offset from
// the start of the data section. All integers little-endian. The file is memory-mapped; float tensors are
// zero-copy views.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vispco::io {

/// GGUF metadata value types (gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
/// "UINT32", "STRING", ... for messages.
std::string gguf_type_name(GgufType t);

/// One metadata value. Scalars fill one field by kind (integers and bools: `i` or `u`; floats: `f`; strings:
/// `s`); arrays fill `ints` / `floats` / `strings` by element kind (arrays of arrays are parsed and their
/// elements dropped, `array_type` kArray).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType array_type = GgufType::kU8;  ///< element type when type == kArray
  uint64_t n = 0;                       ///< element count when type == kArray
  int64_t i = 0;                        ///< signed integers and bools (0/1)
  uint64_t u = 0;                       ///< unsigned integers (also mirrored in `i` when it fits)
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  bool is_integer() const;
  bool is_float() const;
};

/// ggml tensor types vispco knows by size (ggml.h enum ggml_type).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};
/// "F16", "Q8_0", ... or "type N" for a type vispco does not know.
std::string ggml_type_name(uint32_t type);

/// One tensor of a GGUF file.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;     ///< ggml order: ne[0] is the innermost (contiguous) dimension
  std::vector<int64_t> shape;  ///< PyTorch order: ne reversed ([out, in] for a linear weight)
  uint32_t type = 0;           ///< ggml_type
  uint64_t offset = 0;         ///< bytes from the start of the data section
  uint64_t nbytes = 0;         ///< 0 when the type's block size is unknown to vispco
};

/// A memory-mapped, validated GGUF file. Copyable (copies share the mapping).
///
/// Validation at open (each failure throws FormatError naming the file and the field): magic and version (2
/// or 3; version 1's 32-bit counts are refused); counts bounded by the file size; every string and array
/// length within the file; known value types; no duplicate key or tensor name; general.alignment a power of
/// two; 1–4 dimensions, each ≥ 1, element count without overflow and a multiple of the type's block size;
/// every tensor offset aligned and, for types of known size, its bytes inside the data section and not
/// overlapping another tensor. A missing or unreadable file throws IoError.
class GgufFile {
 public:
  /// @throws IoError, FormatError.
  static GgufFile open(const std::string& path);

  const std::string& path() const;
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  /// Byte offset of the data section (the header's end, aligned); tensor offsets count from here.
  uint64_t data_start() const { return data_start_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  /// The value of `key`, or null.
  const GgufValue* find(const std::string& key) const;
  /// Typed getters. Without `fallback` a missing key throws ConfigError naming the file and the key; a value
  /// of another kind throws ConfigError (integers of any width are accepted for an integer, and for a float).
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  /// The info of tensor `name`, or null.
  const GgufTensorInfo* tensor_info(const std::string& name) const;
  /// Tensor `name` on the CPU in PyTorch order: F32/F16/BF16 as a zero-copy view of the mapping (private
  /// copy-on-write pages), Q8_0 dequantised to a new F32 tensor (d · q per block of 32, ggml's
  /// dequantize_row_q8_0). @throws ConfigError when absent or of another ggml type (naming it and the types
  /// vispco reads).
  at::Tensor tensor(const std::string& name) const;

 private:
  struct Mapping;
  std::shared_ptr<Mapping> map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace vispco::io
