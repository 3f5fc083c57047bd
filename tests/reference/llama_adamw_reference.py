#!/usr/bin/env python3
"""Independent reference for tests/train/test_decoder_training_reference.cpp.

A Llama decoder written from the paper/checkpoint definition in plain PyTorch (pre-norm RMSNorm, rotate-half
RoPE, grouped-query attention with repeat_interleave, SwiGLU MLP, untied lm_head), trained for 12 AdamW steps
(linear warm-up, cosine decay, global-norm clipping) on multi-query associative recall: 4 key/value pairs,
then 4 queries whose next token is the paired value; the loss is on the value positions only. Prints the
loss of every step; the C++ test replays the same seeds and data order through LlamaForCausalLM and must
reproduce these numbers. Run with Debian's python3-torch 1.13 (the same LibTorch build as the C++ side):
    python3 tests/reference/llama_adamw_reference.py
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

D, H, HKV, M, V, L = 64, 4, 2, 128, 256, 2
DH = D // H
B, PAIRS, QUERIES, STEPS, LR, WARMUP = 8, 4, 4, 12, 3e-3, 3


class RmsNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))


def rotate(x, cos, sin):
    x1, x2 = x[..., : DH // 2], x[..., DH // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Block(nn.Module):
    # Parameter creation order = the C++ module's registration order (q, k, v, o, gate, up, down, norms),
    # so that normal_(0, 0.02) in named_parameters() order draws the same numbers.
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, H * DH, bias=False)
        self.k = nn.Linear(D, HKV * DH, bias=False)
        self.v = nn.Linear(D, HKV * DH, bias=False)
        self.o = nn.Linear(H * DH, D, bias=False)
        self.gate = nn.Linear(D, M, bias=False)
        self.up = nn.Linear(D, M, bias=False)
        self.down = nn.Linear(M, D, bias=False)
        self.norm1 = RmsNorm()
        self.norm2 = RmsNorm()

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, H, DH).transpose(1, 2)
        k = self.k(h).view(b, t, HKV, DH).transpose(1, 2)
        v = self.v(h).view(b, t, HKV, DH).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = k.repeat_interleave(H // HKV, 1), v.repeat_interleave(H // HKV, 1)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(DH) + mask).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, H * DH))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.norm = RmsNorm()
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, DH, 2).float() / DH))
        angles = torch.arange(t).float()[:, None] * inv_freq[None]
        emb = torch.cat([angles, angles], -1)
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, emb.cos(), emb.sin(), mask)
        return self.head(self.norm(x))


def batch():
    keys = torch.rand(B, 100).argsort(1)[:, :PAIRS] + 10
    vals = torch.randint(110, 210, (B, PAIRS))
    pick = torch.randint(0, PAIRS, (B, QUERIES))
    t = 1 + 2 * PAIRS + 2 * QUERIES
    ids = torch.empty(B, t, dtype=torch.long)
    ids[:, 0] = 1
    pairs = ids[:, 1:1 + 2 * PAIRS].view(B, PAIRS, 2)
    pairs[..., 0], pairs[..., 1] = keys, vals
    queries = ids[:, 1 + 2 * PAIRS:].view(B, QUERIES, 2)
    queries[..., 0], queries[..., 1] = keys.gather(1, pick), vals.gather(1, pick)
    target = torch.full((B, t), -100, dtype=torch.long)
    target[:, 1 + 2 * PAIRS:].view(B, QUERIES, 2)[..., 0] = vals.gather(1, pick)
    return ids, target


def main():
    torch.set_num_threads(1)
    torch.manual_seed(7)
    net = Decoder()
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    opt = torch.optim.AdamW(net.parameters(), lr=LR, weight_decay=0.01)
    for step in range(STEPS):
        lr = LR * (step + 1) / WARMUP if step < WARMUP else \
            LR * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, target = batch()
        logits = net(ids)
        loss = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        print(f"{loss.item():.6f}")


if __name__ == "__main__":
    main()
