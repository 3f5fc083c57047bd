// mmap of a whole file (POSIX), and tensors over it.
#include "io/mapped_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/errors.h"

namespace vispco::io {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, const std::string& kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + kind + " file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(kind + " path '" + path + "' is not a readable regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* base = ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (base == MAP_FAILED) throw IoError("cannot mmap '" + path + "': " + std::strerror(err));
    f->base_ = static_cast<uint8_t*>(base);
  } else {
    ::close(fd);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

void MappedFile::release_pages(uint64_t offset, uint64_t length) const {
  if (base_ == nullptr || offset >= size_) return;
  const uint64_t end = std::min(size_, offset + std::min(length, size_ - offset));
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = (offset + page - 1) / page * page;  // whole pages inside the range only
  const uint64_t last = end / page * page;
  if (last <= first) return;
  ::madvise(base_ + first, last - first, MADV_DONTNEED);  // advisory: a failure leaves the pages resident
}

at::Tensor MappedFile::view(const std::shared_ptr<const MappedFile>& file, uint64_t offset,
                            at::IntArrayRef shape, c10::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  uint8_t* data = file->data() + offset;
  if (reinterpret_cast<uintptr_t>(data) % c10::elementSize(dtype) != 0) {
    at::Tensor copy = at::empty(shape, options);
    std::memcpy(copy.data_ptr(), data, copy.numel() * copy.element_size());
    return copy;
  }
  std::shared_ptr<const MappedFile> keep = file;
  return at::from_blob(
      data, shape, [keep](void*) {}, options);
}

}  // namespace vispco::io
