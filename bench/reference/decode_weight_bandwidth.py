#!/usr/bin/env python3
"""Independent reference for docs/benchmarks.md (issue 20, decode): the weight bandwidth LibTorch's own linear
reaches for one decode row (M = 1), which bounds any LibTorch decoder's tokens/s, written in plain PyTorch
with no vispco code involved.
One decode step of TinyLlama-1.1B reads every decoder weight once (22 layers x q, k, v, o, gate, up, down, plus
the LM head): 2.07 GB in bf16, 4.13 GB in fp32 (vocabulary 1000 as in `vispco bench --preset
llava-tinyllama-1.1b`). This times F.linear(x[1, in], W[out, in]) over those shapes (distinct weights, so none
stays in cache), and prints GB/s and the tokens/s ceiling = bandwidth / weight bytes, per dtype; then one
whole bf16 decode step in plain PyTorch (RMSNorm, GQA attention over a 600-position KV cache written in place,
SwiGLU, LM head), the tokens/s a straightforward LibTorch decoder reaches.
Needs Debian's python3-torch (same LibTorch 1.13 build as libtorch-dev); not part of the test suite.
    /usr/bin/python3 bench/reference/decode_weight_bandwidth.py [--threads 2] [--repeats 5]
"""
import argparse
import math
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
        del weights
    print(f"whole bf16 decode step (plain PyTorch, KV cache of 600): {full_step_tokens_per_s(args.repeats):.2f} tok/s")


def full_step_tokens_per_s(repeats, past=600):
    """One decode row through every layer in bf16 (fp32 softmax and norms), KV cache preallocated."""
    dt, H, HKV, DH = torch.bfloat16, 32, 4, 64
    w = lambda o, i: torch.randn(o, i, dtype=dt) * 0.02
    layers = [{n: w(o, i) for n, (o, i) in zip("qkvogud", SHAPES)} for _ in range(LAYERS)]
    head = w(VOCAB, D)
    kc = [torch.randn(1, HKV, past + repeats + 2, DH, dtype=dt) for _ in range(LAYERS)]
    vc = [torch.randn(1, HKV, past + repeats + 2, DH, dtype=dt) for _ in range(LAYERS)]
    lin = torch.nn.functional.linear

    def rms(x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt)

    def step(x, pos):
        for i, p in enumerate(layers):
            h = rms(x)
            q = lin(h, p["q"]).view(1, HKV, H // HKV, DH)
            kc[i][:, :, pos] = lin(h, p["k"]).view(1, HKV, DH)
            vc[i][:, :, pos] = lin(h, p["v"]).view(1, HKV, DH)
            s = torch.matmul(q.float(), kc[i][:, :, : pos + 1].float().transpose(-1, -2)) / math.sqrt(DH)
            a = torch.matmul(torch.softmax(s, -1), vc[i][:, :, : pos + 1].float()).to(dt).reshape(1, 1, D)
            x = x + lin(a, p["o"])
            h = rms(x)
            x = x + lin(torch.nn.functional.silu(lin(h, p["g"])) * lin(h, p["u"]), p["d"])
        return lin(rms(x), head)

    x = torch.randn(1, 1, D, dtype=dt)
    with torch.no_grad():
        step(x, past)
        t = time.perf_counter()
        for j in range(repeats):
            step(x, past + 1 + j)
    return repeats / (time.perf_counter() - t)


if __name__ == "__main__":
    main()
