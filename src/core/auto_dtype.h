// The hook through which a front end makes `--dtype auto` on the CPU choose by measurement (issue 51) rather
// than by CPU flags alone (model/dtype_calibration.h is the measuring side; cli/main.cpp installs it).
#pragma once
#include <functional>

#include "core/context.h"

namespace vispco {

/// Chooses the CPU compute dtype for "auto", with the intra-op thread count in force when it is called.
using CpuAutoDtype = std::function<DtypeChoice()>;

/// Installs `resolver` for choose_dtype("auto", cpu). Process-wide, like the thread count it depends on:
/// set once by main() before any command runs, never while models run. Empty (the default, and in the tests
/// and library users): the CPU-flag rule of choose_dtype.
void set_cpu_auto_dtype(CpuAutoDtype resolver);

/// The installed resolver (empty when none).
const CpuAutoDtype& cpu_auto_dtype();

}  // namespace vispco
