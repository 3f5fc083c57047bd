// Tests of the run context's parsers.
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

TEST(Context, RejectsUnknownDevice) {
  EXPECT_EQ(parse_device("cpu"), c10::Device(c10::kCPU));
  EXPECT_THROW(parse_device("tpu"), InvalidArgument);
}

}  // namespace vispco
