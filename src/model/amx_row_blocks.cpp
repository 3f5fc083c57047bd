// The AMX matmul's row-block model; see amx_row_blocks.h.
#include "model/amx_row_blocks.h"

#include <string>

#include "core/errors.h"

namespace vispco {
namespace {

// Block sizes measured slow at 1 and at 2 threads (amx_row_blocks.h).
bool slow_at_one_thread(int64_t b) { return b == 58 || b == 59 || b == 61 || b == 62 || b == 63; }
bool slow_at_two_threads(int64_t b) {
  return b == 51 || b == 53 || b == 57 || b == 58 || b == 59 || b == 61 || b == 62;
}

bool slow_block(int64_t b, int threads) {
  if (threads <= 1) return slow_at_one_thread(b);
  if (threads == 2) return slow_at_two_threads(b);
  return slow_at_one_thread(b) || slow_at_two_threads(b);
}

}  // namespace

AmxRowBlocks amx_row_blocks(int64_t rows) {
  if (rows < 1) throw InvalidArgument("amx_row_blocks: rows must be >= 1, got " + std::to_string(rows));
  if (rows < 32) return {rows, 0};
  for (int64_t b = 64; b >= 32; --b)
    if (rows % b == 0) return {b, 0};
  return {64, rows % 64};
}

bool amx_slow_row_count(int64_t rows, int threads) {
  const auto [block, tail] = amx_row_blocks(rows);
  return slow_block(block, threads) || slow_block(tail, threads);
}

int64_t amx_fast_row_count(int64_t rows, int threads) {
  int64_t r = rows;
  while (amx_slow_row_count(r, threads)) ++r;
  return r;
}

}  // namespace vispco
