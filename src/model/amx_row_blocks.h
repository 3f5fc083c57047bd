// Which row counts of a bf16 x·Wᵀ are slow on oneDNN's AMX matmul in LibTorch 1.13, and the nearest fast one.
#pragma once
#include <cstdint>

namespace vispco {

/// How LibTorch 1.13's oneDNN AMX brgemm matmul (`brg:avx512_core_amx_bf16` in ONEDNN_VERBOSE) blocks the M
/// rows of a bf16 product: blocks of the largest divisor of M in [32, 64]; when M has none, 64-row blocks and
/// one tail block of M mod 64 rows. The model is inferred from measured sweeps, not read from oneDNN's
/// source, and explains nearly every cliff in them (docs/benchmarks.md, "the bf16 row-count cliff"): a
/// product is 2–5× slower when a block or the tail has one of a few sizes (amx_slow_row_count).
struct AmxRowBlocks {
  int64_t block = 0;  ///< rows per full block, 32..64 (or rows itself when rows < 32)
  int64_t tail = 0;   ///< rows of the last, partial block; 0 when block divides rows
};

/// The row blocks of `rows` (≥ 1) under the model above. @throws std::invalid_argument if rows < 1.
AmxRowBlocks amx_row_blocks(int64_t rows);

/// Whether a bf16 product of `rows` rows runs 2–5× below the AMX rate of its neighbours: a block or tail of
/// 49, 51, 53, 57, 58, 59, 61, 62 or 63 rows. Measured (every row count 64–1,700, 2,048 → 2,048; every 8th to
/// 1,600 at 2,048 → 256 / 11,008 and 11,008 → 2,048; quiet 2-vCPU AMX Xeon): at 1 thread blocks of 58, 59,
/// 61, 62 were slow at every row count (25–28 each), 63 at 4 of 25, 49 at 2 of 26; at 2 threads 51, 53,
/// 57–59, 61, 62 at 18–26 of 26–31 each; tails alike. Every other size was slow at ≤ 2 row counts.
bool amx_slow_row_count(int64_t rows);

/// The smallest row count ≥ rows that amx_slow_row_count does not flag (rows + 0..8 for rows ≤ 100,000).
int64_t amx_fast_row_count(int64_t rows);

}  // namespace vispco
