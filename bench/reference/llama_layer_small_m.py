#!/usr/bin/env python3
"""Independent reference for docs/benchmarks.md (issue 5): how much faster one TinyLlama-1.1B decoder layer runs
at 104 tokens (N_t 40 + K 64) than at 616 (N_t 40 + N_v 576), written in plain PyTorch with the same operations
as src/model/llama.cpp (RMSNorm, GQA 32/4 attention, SwiGLU MLP), fp32, no vispco code involved.
Prints per-layer time, GFLOP/s and the measured/FLOPs speedup ratio at each batch size, plus the time share of
aten::mm at batch 1 (torch.profiler).
Needs Debian's python3-torch (same LibTorch 1.13 build as libtorch-dev); not part of the test suite.
    /usr/bin/python3 bench/reference/llama_layer_small_m.py [--threads 2] [--batches 1,4]
"""
import argparse
import time

import torch

D, F, H, HKV, DH = 2048, 5632, 32, 4, 64  # TinyLlama-1.1B
N_LAYERS = 3  # distinct weights, so no layer's weights stay in cache for the next


def flops(t):
    """FLOPs of one layer at t tokens, as cost/flops.h counts them (multiply-add = 2, no causal halving)."""
    return 2 * t * (2 * D * D + 2 * D * HKV * DH + 3 * D * F) + 2 * 2 * H * t * t * DH


def rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


def make_layer():
    w = lambda i, o: torch.randn(o, i) * 0.02
    return dict(q=w(D, D), k=w(D, HKV * DH), v=w(D, HKV * DH), o=w(D, D), g=w(D, F), u=w(D, F), d=w(F, D))


@torch.no_grad()
def layer(x, W):
    lin = torch.nn.functional.linear
    b, t, _ = x.shape
    h = rms(x)
    q = lin(h, W["q"]).view(b, t, H, DH).transpose(1, 2)
    k = lin(h, W["k"]).view(b, t, HKV, DH).transpose(1, 2)
    v = lin(h, W["v"]).view(b, t, HKV, DH).transpose(1, 2)
    qg = q.contiguous().view(b, HKV, H // HKV * t, DH)
    p = torch.softmax(qg @ k.transpose(-1, -2) / DH**0.5, -1)
    a = (p @ v).view(b, H, t, DH).transpose(1, 2).reshape(b, t, D)
    x = x + lin(a, W["o"])
    h = rms(x)
    return x + lin(torch.nn.functional.silu(lin(h, W["g"])) * lin(h, W["u"]), W["d"])


def median_ms(f, n=5):
    f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,4")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    layers = [make_layer() for _ in range(N_LAYERS)]
    net = lambda x: [x := layer(x, W) for W in layers][-1]
    for b in [int(s) for s in args.batches.split(",")]:
        ms = {}
        for t in (616, 104):
            x = torch.randn(b, t, D)
            ms[t] = median_ms(lambda: net(x)) / N_LAYERS
            print(f"batch {b}, {t} tokens: {ms[t]:7.1f} ms/layer, {b * flops(t) / ms[t] / 1e6:6.1f} GFLOP/s")
        meas, pred = ms[616] / ms[104], flops(616) / flops(104)
        print(f"batch {b}: speedup {meas:.2f}x measured vs {pred:.2f}x FLOPs -> ratio {meas / pred:.2f}")
    from torch.profiler import profile
    for t in (616, 104):
        x = torch.randn(1, t, D)
        net(x)
        with profile() as prof:
            net(x)
        ev = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
        total = sum(ev.values())
        print(f"batch 1, {t} tokens: aten::mm {ev.get('aten::mm', 0) / total:.0%} of operator time, "
              f"{2 * t * (2 * D * D + 2 * D * HKV * DH + 3 * D * F) * N_LAYERS / ev.get('aten::mm', 1) / 1e3:.1f} GFLOP/s in mm")


if __name__ == "__main__":
    main()
