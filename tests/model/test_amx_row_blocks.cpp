// Tests of the AMX matmul's row-block model (model/amx_row_blocks.h) on row counts factored by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

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
  EXPECT_THROW(amx_row_blocks(0), std::invalid_argument);
}

// Row counts the sweeps measured 2–5× slow (docs/benchmarks.md) and neighbours measured fast.
TEST(AmxRowBlocks, FlagsTheMeasuredCliffs) {
  for (int64_t rows : {232, 236, 244, 248, 413, 464, 496, 928, 944, 976, 992, 1037, 1392, 1488, 153, 174})
    EXPECT_TRUE(amx_slow_row_count(rows)) << rows;
  for (int64_t rows : {240, 416, 1040, 1222, 1262, 296, 346, 1064, 1280, 1296, 960})
    EXPECT_FALSE(amx_slow_row_count(rows)) << rows;
}

TEST(AmxRowBlocks, FastRowCountIsTheNextUnflagged) {
  EXPECT_EQ(amx_fast_row_count(464), 465);  // 7 · 64 + 17
  EXPECT_EQ(amx_fast_row_count(174), 175);  // 5 · 35
  EXPECT_EQ(amx_fast_row_count(153), 154);  // 2 · 64 + 26
  // 251 = 3·64+59, 252 = 4·63, 253 = 3·64+61, 254 = 3·64+62, 255 = 5·51: all flagged; 256 = 4·64.
  EXPECT_EQ(amx_fast_row_count(251), 256);
  EXPECT_EQ(amx_fast_row_count(1262), 1262);
}

// The header's bound: never more than 8 rows added up to 100,000 rows (the worst case is a run of flagged
// counts like 251..255 above), and the result is never flagged itself.
TEST(AmxRowBlocks, FastRowCountAddsAtMostEightRows) {
  int64_t most = 0;
  for (int64_t rows = 1; rows <= 100000; ++rows) {
    const int64_t fast = amx_fast_row_count(rows);
    ASSERT_FALSE(amx_slow_row_count(fast)) << rows;
    most = std::max(most, fast - rows);
  }
  EXPECT_LE(most, 8);
  EXPECT_GE(most, 5);  // 251 → 256 already adds 5: the bound is not vacuous
}

}  // namespace
}  // namespace vispco
