#!/usr/bin/env python3
"""Independent reference for docs/benchmarks.md (issue 20, decode): the weight bandwidth LibTorch's own linear
reaches for one decode row (M = 1), which bounds any LibTorch decoder's tokens/s, written in plain PyTorch
with no vispco code involved.
One decode step of TinyLlama-1.1B reads every decoder weight once (22 layers x q, k, v, o, gate, up, down, plus
the LM head): 2.07 GB in bf16, 4.13 GB in fp32 (vocabulary 1000 as in `vispco bench --preset
llava-tinyllama-1.1b`). This times F.linear(x[1, in], W[out, in]) over those shapes (distinct weights, so none
stays in cache), and prints GB/s and the tokens/s ceiling = bandwidth / weight bytes, per dtype.
Needs Debian's python3-torch (same LibTorch 1.13 build as libtorch-dev); not part of the test suite.
    /usr/bin/python3 bench/reference/decode_weight_bandwidth.py [--threads 2] [--repeats 5]
"""
import argparse
import time

import torch

D, F, KV, LAYERS, VOCAB = 2048, 5632, 256, 22, 1000  # TinyLlama-1.1B (GQA: 4 KV heads x 64)
SHAPES = [(D, D), (KV, D), (KV, D), (D, D), (F, D), (F, D), (D, F)]  # (out, in) of q, k, v, o, gate, up, down


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, one decode row (M = 1) through F.linear")
    for dt in (torch.float32, torch.bfloat16):
        weights = [torch.randn(o, i, dtype=dt) * 0.02 for _ in range(LAYERS) for (o, i) in SHAPES]
        weights.append(torch.randn(VOCAB, D, dtype=dt) * 0.02)
        nbytes = sum(w.numel() * w.element_size() for w in weights)
        xs = {i: torch.randn(1, i, dtype=dt) for i in (D, F)}

        def step():
            for w in weights:
                torch.nn.functional.linear(xs[w.shape[1]], w)

        step()  # warm-up
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        s = sorted(times)[len(times) // 2]
        print(f"{str(dt):15s} weights {nbytes / 1e9:.2f} GB  one step {s * 1000:7.1f} ms  "
              f"{nbytes / s / 1e9:5.1f} GB/s  ceiling {1 / s:5.1f} tok/s (linear layers only)")


if __name__ == "__main__":
    main()
