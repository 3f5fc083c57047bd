// Reader and writer of the safetensors format (Hugging Face, https://github.com/huggingface/safetensors):
// 8-byte little-endian header length N, N bytes of JSON header {name: {dtype, shape, data_offsets}, optional
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes. Files are memory-mapped; tensors are
// zero-copy views into the mapping.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vispco::io {

/// One tensor entry of a safetensors header. Offsets are relative to the start of the data section.
struct TensorInfo {
  std::string dtype;           ///< safetensors dtype string: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL
  std::vector<int64_t> shape;  ///< PyTorch order; empty for a scalar
  uint64_t begin = 0;          ///< data_offsets[0], bytes
  uint64_t end = 0;            ///< data_offsets[1], bytes (exclusive)
};

/// A memory-mapped, validated safetensors file. Copyable (copies share the mapping).
///
/// Validation at open (each failure throws FormatError naming the file and the offending field):
/// header length within the file and ≤ 100 MB; header is a JSON object; every entry has a known dtype, a
/// shape of non-negative ints and two offsets with begin ≤ end ≤ data size; end − begin == numel × element
/// size; no two entries overlap. A missing or unreadable file throws IoError.
class SafetensorsFile {
 public:
  /// Opens and validates `path`. @throws IoError, FormatError.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const;
  /// All entries, by tensor name.
  const std::map<std::string, TensorInfo>& entries() const;
  /// The "__metadata__" map (empty when absent).
  const std::map<std::string, std::string>& metadata() const;
  bool contains(const std::string& name) const;
  /// A CPU tensor viewing the mapped bytes (no copy), dtype and shape as stored. The mapping stays alive
  /// as long as any returned tensor does. Writes to it stay private (copy-on-write mapping) and are seen
  /// by every other view of the same file object. Exception: bytes not aligned to the element size (a
  /// header length that is not a multiple of 8, or an unusual layout) are copied into a fresh tensor.
  /// The file must not be truncated while mapped (SIGBUS).
  /// @throws ConfigError when `name` is absent (the message names the file).
  at::Tensor tensor(const std::string& name) const;
  /// Drops the resident pages of tensor `name`'s bytes (MappedFile::release_pages): for a loader done with
  /// them after converting the tensor to another dtype. Views stay valid (read again from the file).
  /// @throws ConfigError when `name` is absent.
  void release(const std::string& name) const;

 private:
  struct Mapping;
  const TensorInfo& entry(const std::string& name) const;  // @throws ConfigError when absent
  std::shared_ptr<Mapping> map_;
  std::map<std::string, TensorInfo> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` (any device, any of the dtypes above; made contiguous on CPU for writing) to `path` in
/// safetensors format: header entries in name order, padded with spaces to a multiple of 8 bytes; data
/// contiguous, widest element size first then by name (as the reference `serialize`), so every tensor is
/// aligned to its element size. Written to `path + ".tmp"`, then renamed over `path`.
/// @throws IoError when the file cannot be written, InvalidArgument for an unsupported dtype, an undefined
/// tensor or the reserved name "__metadata__".
void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// The safetensors dtype string of a LibTorch dtype ("F32", "BF16", ...). @throws InvalidArgument.
std::string safetensors_dtype(c10::ScalarType dtype);
/// The LibTorch dtype of a safetensors dtype string. @throws FormatError.
c10::ScalarType torch_dtype(const std::string& safetensors_dtype);

/// The tensors of a Hugging Face checkpoint folder: `model.safetensors`, or the shards listed in
/// `model.safetensors.index.json` ({"weight_map": {name: shard file}}). Every shard is mapped once.
/// `model.safetensors` wins when both exist (as transformers); with an index, the tensors are exactly the
/// names of its weight_map.
class CheckpointTensors {
 public:
  /// @throws IoError when neither file exists or a shard is missing; FormatError for a malformed index or
  /// shard, a shard name that is not a plain file name, or a tensor the index places in a shard lacking it.
  static CheckpointTensors open_dir(const std::string& dir);
  /// Every tensor name across shards, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// Zero-copy view of one tensor. @throws ConfigError naming the tensor and the folder when absent.
  at::Tensor tensor(const std::string& name) const;
  /// SafetensorsFile::release on the shard holding `name`. @throws ConfigError when absent.
  void release(const std::string& name) const;
  const std::string& dir() const { return dir_; }

 private:
  const SafetensorsFile& shard(const std::string& name) const;  // @throws ConfigError when absent
  std::string dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
};

}  // namespace vispco::io
