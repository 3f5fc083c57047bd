// Tests of the AMX matmul's row-block model (model/amx_row_blocks.h) on row counts factored by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "model/amx_row_blocks.h"

namespace vispco {
namespace {

TEST(AmxRowBlocks, LargestDivisorFrom32To64ElseBlocksOf64AndATail) {
  // "block/tail" of a row count.
  auto blocks = [](int64_t rows) {
    const auto b = amx_row_blocks(rows);
    return std::to_string(b.block) + "/" + std::to_string(b.tail);
  };
  EXPECT_EQ(blocks(464), "58/0");    // 8 · 58
  EXPECT_EQ(blocks(240), "60/0");    // 4 · 60 (also 48 and 40 divide it)
  EXPECT_EQ(blocks(1024), "64/0");   // 16 · 64
  EXPECT_EQ(blocks(174), "58/0");    // 3 · 58
  EXPECT_EQ(blocks(251), "64/59");   // prime: 3 · 64 + 59
  EXPECT_EQ(blocks(1262), "64/46");  // 2 · 631: 19 · 64 + 46
  EXPECT_EQ(blocks(465), "64/17");   // 3 · 5 · 31: 7 · 64 + 17
  EXPECT_EQ(blocks(20), "20/0");     // below 32: one block
  EXPECT_THROW(amx_row_blocks(0), InvalidArgument);
  EXPECT_THROW(amx_slow_row_count(-3, 2), InvalidArgument);
}

// Row counts the sweeps measured slow (docs/benchmarks.md) and neighbours measured fast, at 2 threads.
TEST(AmxRowBlocks, FlagsTheMeasuredCliffsAtTwoThreads) {
  for (int64_t rows : {232, 236, 244, 248, 413, 464, 496, 928, 944, 976, 992, 1037, 1392, 1488, 153, 174})
    EXPECT_TRUE(amx_slow_row_count(rows, 2)) << rows;
  for (int64_t rows : {240, 416, 1040, 1222, 1262, 296, 346, 1064, 1280, 1296, 960, 504})
    EXPECT_FALSE(amx_slow_row_count(rows, 2)) << rows;
}

// Blocks of 51, 53 and 57 rows were slow at 2 threads only, 63 at 1 thread only; more threads take both.
TEST(AmxRowBlocks, TheFlaggedSizesDependOnTheThreadCount) {
  EXPECT_TRUE(amx_slow_row_count(153, 2));  // 3 · 51
  EXPECT_FALSE(amx_slow_row_count(153, 1));
  EXPECT_TRUE(amx_slow_row_count(153, 8));
  EXPECT_TRUE(amx_slow_row_count(504, 1));  // 8 · 63
  EXPECT_FALSE(amx_slow_row_count(504, 2));
  EXPECT_TRUE(amx_slow_row_count(504, 16));
  EXPECT_FALSE(amx_slow_row_count(245, 2));  // 5 · 49: 49 is not flagged at any count
  EXPECT_FALSE(amx_slow_row_count(245, 1));
}

TEST(AmxRowBlocks, FastRowCountIsTheNextUnflagged) {
  EXPECT_EQ(amx_fast_row_count(464, 2), 465);  // 7 · 64 + 17
  EXPECT_EQ(amx_fast_row_count(174, 2), 175);  // 5 · 35
  EXPECT_EQ(amx_fast_row_count(153, 2), 154);  // 2 · 64 + 26
  EXPECT_EQ(amx_fast_row_count(153, 1), 153);
  // 251 = 3·64+59, 252 = 4·63, 253 = 3·64+61, 254 = 3·64+62, 255 = 5·51, 256 = 4·64.
  EXPECT_EQ(amx_fast_row_count(251, 2), 252);  // 63 is not flagged at 2 threads
  EXPECT_EQ(amx_fast_row_count(251, 1), 255);  // nor 51 at 1 thread
  EXPECT_EQ(amx_fast_row_count(251, 4), 256);  // the union flags all of 251..255
  EXPECT_EQ(amx_fast_row_count(1262, 2), 1262);
}

// The header's bounds: at most 7 rows added at 1 or 2 threads and 8 above, up to 100,000 rows, and the result
// is never flagged itself.
TEST(AmxRowBlocks, FastRowCountAddsAFewRowsAtMost) {
  for (int threads : {1, 2, 4}) {
    int64_t most = 0;
    for (int64_t rows = 1; rows <= 100000; ++rows) {
      const int64_t fast = amx_fast_row_count(rows, threads);
      ASSERT_FALSE(amx_slow_row_count(fast, threads)) << rows;
      most = std::max(most, fast - rows);
    }
    EXPECT_LE(most, threads <= 2 ? 7 : 8) << threads << " threads";
    EXPECT_GE(most, 4) << threads << " threads";  // 251 → 255 at 1 thread already adds 4: not vacuous
  }
}

}  // namespace
}  // namespace vispco
