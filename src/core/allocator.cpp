// glibc allocator settings (see allocator.h).
#include "core/allocator.h"

#include <malloc.h>

namespace vispco {

void keep_large_buffers_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace vispco
