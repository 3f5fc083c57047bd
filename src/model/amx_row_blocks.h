// Which row counts of a bf16 x·Wᵀ are slow on oneDNN's AMX matmul in LibTorch 1.13, and the nearest fast one.
#pragma once
#include <cstdint>

namespace vispco {

/// How LibTorch 1.13's oneDNN AMX brgemm matmul (`brg:avx512_core_amx_bf16` in ONEDNN_VERBOSE) blocks the M
/// rows of a bf16 product, as far as measurement shows: blocks of the largest divisor of M in [32, 64]; when
/// M has none, 64-row blocks and one tail block of M mod 64 rows. Inferred from sweeps (docs/benchmarks.md,
/// "the bf16 row-count cliff"; bench/reference/amx_row_sweep.py), not read from oneDNN's source: a product
/// runs well below its neighbours' rate when a block, or a tail, has one of a few sizes (amx_slow_row_count).
struct AmxRowBlocks {
  int64_t block = 0;  ///< rows per full block, 32..64 (rows itself when rows < 32)
  int64_t tail = 0;   ///< rows of the last, partial block; 0 when block divides rows
};

/// The row blocks of `rows` under the model above. @throws InvalidArgument if rows < 1.
AmxRowBlocks amx_row_blocks(int64_t rows);

/// Whether amx_row_blocks(rows) has a block or tail of a size measured slow at `threads` intra-op threads:
/// 1 thread: 58, 59, 61, 62, 63; 2 threads: 51, 53, 57, 58, 59, 61, 62; more threads (never measured): the
/// union of both, since a wrong flag costs ≤ 8 extra rows and a copy of x where a missed one costs 1.5–5×.
/// Measured on a quiet 2-vCPU AMX Xeon, bf16, LibTorch 1.13 (python3-torch): every row count 64–1,700 at
/// 2,048 → 2,048 (1 and 2 threads) and 1,280 → 3,840 (2 threads), 1,700–4,100 at 2,048 → 2,048 (2 threads),
/// every 8th to 1,600 at 2,048 → 256 / 11,008 and 11,008 → 2,048. "Slow" = below 0.65 of the median of the ±6
/// neighbouring row counts (most flagged ones run at 0.2–0.5): 1 thread, blocks of 58, 59, 61, 62 at 25–28 of
/// 26–28 row counts each, 63 at 4 of 25; 2 threads, 51, 53, 57–59, 61, 62 at 18–26 of 26–31 (2,048 wide; 51
/// and 53 weaker above 1,700 rows); tails of 53, 59, 61 rows at 6–11 of 16–19. Every other size was slow at
/// ≤ 2 row counts, and a few unflagged counts are slow too (e.g. 507 = 13·39). Of the row counts 64–1,700 at
/// 2,048 → 2,048 the rule flags 306 at 2 threads (173 measured slow) and misses 8 slow ones; at 1 thread 211
/// (120 slow), missing 19. @throws InvalidArgument if rows < 1.
bool amx_slow_row_count(int64_t rows, int threads);

/// The smallest row count ≥ rows that amx_slow_row_count(·, threads) does not flag: rows + 0..7 at 1 or 2
/// threads, + 0..8 above (checked up to 100,000 rows). @throws InvalidArgument if rows < 1.
int64_t amx_fast_row_count(int64_t rows, int threads);

}  // namespace vispco
