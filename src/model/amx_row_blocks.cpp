// The AMX matmul's row-block model; see amx_row_blocks.h.
#include "model/amx_row_blocks.h"

#include <stdexcept>
#include <string>

namespace vispco {
namespace {

bool slow_block(int64_t b) {
  switch (b) {
    case 49:
    case 51:
    case 53:
    case 57:
    case 58:
    case 59:
    case 61:
    case 62:
    case 63:
      return true;
    default:
      return false;
  }
}

}  // namespace

AmxRowBlocks amx_row_blocks(int64_t rows) {
  if (rows < 1) throw std::invalid_argument("amx_row_blocks: rows must be >= 1, got " + std::to_string(rows));
  if (rows < 32) return {rows, 0};
  for (int64_t b = 64; b >= 32; --b)
    if (rows % b == 0) return {b, 0};
  return {64, rows % 64};
}

bool amx_slow_row_count(int64_t rows) {
  const auto [block, tail] = amx_row_blocks(rows);
  return slow_block(block) || slow_block(tail);
}

int64_t amx_fast_row_count(int64_t rows) {
  int64_t r = rows;
  while (amx_slow_row_count(r)) ++r;
  return r;
}

}  // namespace vispco
