// A whole file memory-mapped for reading, and zero-copy CPU tensors viewing it: the one mmap of the
// checkpoint readers (safetensors.cpp, gguf.cpp).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

namespace vispco::io {

/// The bytes of one file, mapped private copy-on-write (a write through a view stays in this process and is
/// seen by every other view of the same object). An empty file maps nothing (data() is null).
class MappedFile {
 public:
  /// @param kind the format, for messages ("safetensors", "GGUF"). @throws IoError when the file cannot be
  /// opened, is not a regular file, or cannot be mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path, const std::string& kind);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }

  /// A CPU tensor of `shape` and `dtype` over the bytes at `offset` (the caller has checked the bounds): a
  /// view that keeps the mapping alive, or a copy when those bytes are not aligned to the element size
  /// (LibTorch kernels must not get a misaligned pointer).
  static at::Tensor view(const std::shared_ptr<const MappedFile>& file, uint64_t offset,
                         at::IntArrayRef shape, c10::ScalarType dtype);

  /// Drops this process's resident pages of the bytes [offset, offset + length) (the whole pages inside that
  /// range; madvise MADV_DONTNEED). The bytes stay readable: a later read faults them in again from the file.
  /// For a loader that has converted a tensor to another dtype and no longer needs its mapped bytes (issue
  /// 20: without it, a bf16 checkpoint converted to fp32 keeps the mapped file resident beside the copies).
  /// A write made through a view of those pages is discarded, so call it only on bytes nothing has written.
  /// Out-of-range bytes are clamped to the file; an empty range does nothing.
  void release_pages(uint64_t offset, uint64_t length) const;

 private:
  MappedFile() = default;
  std::string path_;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace vispco::io
