// Tests of the run context's parsers and thread set-up.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "core/context.h"
#include "core/errors.h"

namespace vispco {

TEST(Context, ParsesDtypes) {
  EXPECT_EQ(parse_dtype("bf16"), c10::kBFloat16);
  EXPECT_EQ(parse_dtype("fp32"), c10::kFloat);
  EXPECT_EQ(dtype_name(parse_dtype("float16")), "fp16");
  EXPECT_THROW(parse_dtype("int4"), InvalidArgument);
}

// --threads N reaches LibTorch's pool and, where the process has it, OpenBLAS's own pool (which
// at::set_num_threads does not govern).
TEST(Context, ThreadCountReachesLibTorchAndOpenBlas) {
  using GetThreads = int (*)();
  auto openblas_threads = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  for (int n : {1, 2}) {
    RunContext ctx;
    ctx.n_threads = n;
    apply_threads(ctx);
    EXPECT_EQ(at::get_num_threads(), n);
    // A serial OpenBLAS build (libopenblas0-serial) reports 1 whatever it is told.
    if (openblas_threads != nullptr && !(n > 1 && openblas_threads() == 1)) EXPECT_EQ(openblas_threads(), n);
  }
  if (openblas_threads == nullptr)
    GTEST_SKIP() << "this LibTorch does not use OpenBLAS; only LibTorch's pool checked";
}

TEST(Context, RejectsUnknownDevice) {
  EXPECT_EQ(parse_device("cpu"), c10::Device(c10::kCPU));
  EXPECT_THROW(parse_device("tpu"), InvalidArgument);
}

}  // namespace vispco
