#!/usr/bin/env python3
"""Independent reference for docs/benchmarks.md ("the bf16 row-count cliff", issue 47): the speed of LibTorch's
own bf16 F.linear at every row count of a range, and which of the slow row counts the block rule of
src/model/amx_row_blocks.h predicts — written in plain PyTorch with no vispco code involved (the rule is
restated here from its description: blocks of the largest divisor of M in [32, 64], else 64-row blocks and a
tail of M mod 64; a block or tail of 58, 59, 61, 62 or 63 rows is flagged at 1 thread, of 51, 53, 57, 58, 59,
61 or 62 at 2 threads, of any of these above).
A row count is "slow" when its GFLOP/s is below 0.65 of the median of its ±6 neighbours. Prints, per block
size, how many row counts with that block were slow, then the slow row counts the rule does not flag, and the
summed time of the flagged row counts run as they are and moved to the next unflagged count.
Needs Debian's python3-torch (same LibTorch 1.13 build as libtorch-dev) on a CPU with AMX-BF16 (elsewhere the
cliffs are other ones or none); not part of the test suite. Takes ~1 minute at the defaults, 2 threads.
    /usr/bin/python3 bench/reference/amx_row_sweep.py [--threads 2] [--in 2048] [--out 2048] [--lo 64] [--hi 1700]
"""
import argparse
import time
from collections import Counter

import torch

FLAGGED_1 = {58, 59, 61, 62, 63}
FLAGGED_2 = {51, 53, 57, 58, 59, 61, 62}
FLAGGED = FLAGGED_2  # set in main() from --threads


def blocks(m):
    """(block, tail) of m rows under the rule."""
    for b in range(64, 31, -1):
        if m % b == 0:
            return b, 0
    return 64, m % 64


def flagged(m):
    b, t = blocks(m)
    return m >= 32 and (b in FLAGGED or t in FLAGGED)


def best_ms(f, n=3):
    f()
    best = float("inf")
    for _ in range(n):
        s = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - s)
    return best * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--in", dest="inp", type=int, default=2048)
    p.add_argument("--out", type=int, default=2048)
    p.add_argument("--lo", type=int, default=64)
    p.add_argument("--hi", type=int, default=1700)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    global FLAGGED
    FLAGGED = FLAGGED_1 if a.threads <= 1 else FLAGGED_2 if a.threads == 2 else FLAGGED_1 | FLAGGED_2
    w = torch.randn(a.out, a.inp).bfloat16()
    ms = {}
    for m in range(a.lo, a.hi + 9):  # up to 8 past hi, so every moved row count is timed too
        x = torch.randn(m, a.inp).bfloat16()
        ms[m] = best_ms(lambda: torch.nn.functional.linear(x, w))
    rate = {m: 2 * m * a.inp * a.out / t / 1e6 for m, t in ms.items()}  # GFLOP/s
    slow = set()
    for m in range(a.lo, a.hi + 1):
        nb = sorted(rate[k] for k in range(m - 6, m + 7) if k in rate and k != m)
        if rate[m] < 0.65 * nb[len(nb) // 2]:
            slow.add(m)
    by_block, n_block = Counter(), Counter()
    for m in range(a.lo, a.hi + 1):
        b, t = blocks(m)
        key = b if t == 0 else f"64+{t}"
        n_block[key] += 1
        by_block[key] += m in slow
    print(f"{a.inp} -> {a.out}, bf16, {a.threads} threads: {len(slow)} slow row counts of {a.hi - a.lo + 1}")
    print("slow / all, by block:", ", ".join(f"{k}: {by_block[k]}/{n_block[k]}" for k in n_block if by_block[k]))
    print("slow and not flagged:", sorted(m for m in slow if not flagged(m)))
    moved = [m for m in range(a.lo, a.hi + 1) if flagged(m)]
    def target(m):
        while flagged(m):
            m += 1
        return m
    as_is = sum(ms[m] for m in moved)
    at_target = sum(ms[target(m)] for m in moved if target(m) in ms)
    print(f"{len(moved)} flagged row counts: {as_is:.0f} ms as they are, {at_target:.0f} ms at the next unflagged "
          "count (without the copy of x)")


if __name__ == "__main__":
    main()
