// The test binary's main(): the CLI's allocator settings (core/allocator.h), then GoogleTest. Without them
// the tests that evaluate models spent half their CPU time re-faulting freed activation buffers.
#include <gtest/gtest.h>

#include "core/allocator.h"

int main(int argc, char** argv) {
  vispco::keep_large_buffers_in_heap();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
