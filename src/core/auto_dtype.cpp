// Storage of the `--dtype auto` resolver (see auto_dtype.h).
#include "core/auto_dtype.h"

#include <utility>

namespace vispco {
namespace {
CpuAutoDtype& slot() {
  static CpuAutoDtype resolver;
  return resolver;
}
}  // namespace

void set_cpu_auto_dtype(CpuAutoDtype resolver) { slot() = std::move(resolver); }

const CpuAutoDtype& cpu_auto_dtype() { return slot(); }

}  // namespace vispco
