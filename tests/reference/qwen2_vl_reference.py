#!/usr/bin/env python3
"""Independent float64 reference of the Hugging Face Qwen2-VL / Qwen2.5-VL forward (image processor, vision tower,
patch merger, M-RoPE Qwen2 decoder), for vispco's Qwen family tests (tests/reference/qwen_README.md).

Written from transformers v4.55's semantics (models/qwen2_vl: image_processing_qwen2_vl.py smart_resize / _preprocess,
modeling_qwen2_vl.py; models/qwen2_5_vl/modeling_qwen2_5_vl.py), sharing no code with vispco:
  * image processor (Qwen2VLImageProcessor, the slow PIL path): smart_resize with factor = patch * merge (28) — each
    side rounded to the nearest multiple with Python's round() (half to even: 42 px -> 56, 70 px -> 56), and if the
    area leaves [min_pixels, max_pixels], beta = sqrt(h*w / max) or sqrt(min / (h*w)) and each side floored
    (max(factor, floor(side / beta / factor) * factor)) or ceiled (ceil(side * beta / factor) * factor); aspect ratio
    above 200 refused. Pillow BICUBIC resize of the uint8 image (no resize when the size already matches: Pillow
    returns a copy), x / 255, (x - image_mean) / image_std, the frame repeated to temporal_patch_size, then
    reshape [t, T_p, C, h/m, m, p, w/m, m, p] -> permute (0, 3, 6, 4, 7, 2, 1, 5, 8) -> [t*h*w, C*T_p*p*p]: patches
    in merge-blocked order (each 2x2 block of the merge grid consecutive, blocks row-major), each row C, then time,
    then the p x p pixels. (transformers computes the normalisation in float32; this is float64.)
  * vision tower: Conv3d patch embedding as one matmul; 2-D rotary embedding: head_dim/2 rotary dims, inv_freq
    1 / 10000^(arange(0, head_dim/2, 2) / (head_dim/2)) (in float32, as transformers builds it), row positions for
    the first head_dim/4 frequencies and column positions for the next, in the same merge-blocked order, emb =
    cat(freqs, freqs), rotate-half. Qwen2-VL blocks: LayerNorm (eps 1e-6), attention over the whole image, MLP
    fc1 -> hidden_act (quick_gelu in the published configs) -> fc2, width embed_dim * mlp_ratio. Qwen2.5-VL blocks:
    RMSNorm (eps 1e-6), SwiGLU MLP with biases, window attention: get_window_index groups the merged grid into
    windows of window_size / patch / merge merged tokens a side (padded windows at the right and bottom edges are
    smaller), the tokens reordered window by window in units of merge*merge patches (and the rotary table with
    them), attention inside each window except at fullatt_block_indexes (whole image), and the merger output put
    back in merged-grid order with argsort(window_index). PatchMerger: ln_q (LayerNorm for Qwen2-VL, RMSNorm for
    Qwen2.5-VL), 4 consecutive patches concatenated, Linear -> GELU (erf) -> Linear -> [N_v, D].
  * decoder: Qwen2 (q/k/v biases, no o_proj bias, GQA, RMSNorm, SwiGLU, lm_head or tied embeddings), M-RoPE:
    three position ids (t, h, w) per token, inv_freq 1 / rope_theta^(arange(0, D_h, 2) / D_h) (float32), frequency
    j uses the t positions for j < s0, h for s0 <= j < s0 + s1, w after (mrope_section [s0, s1, s2], both halves of
    the rotate-half layout alike). Positions by get_rope_index: an image counts only where vision_start_token_id is
    directly followed by image_token_id (otherwise all positions are 0..T-1); text before the image continues from
    the last position + 1 (from 0 at the start), the N_v image tokens get (st + 0, st + row, st + col) on the merged
    grid with st = the next free position, the text after them starts at max(all positions so far) + 1. Greedy
    token k gets max(prompt positions) + 1 + k on all three axes (transformers' rope_deltas while decoding).
  * checkpoints: config.json (text fields at top level, or under text_config as newer transformers writes them;
    rope_scaling or rope_parameters), model.safetensors or shards listed by model.safetensors.index.json, F32 / F16
    / BF16, read here; keys `visual.*`, `model.*`, `lm_head.*` or the newer `model.visual.*`,
    `model.language_model.*`, `lm_head.*`.

Usage:
  python3 qwen2_vl_reference.py MODEL_DIR IMAGE.ppm IDS STEPS [--mask-from-layer L --masked POSITIONS] [--pixels]
                                [--visionzip]
    IMAGE.ppm  the ORIGINAL image, binary P6; the reference does the smart resize
    IDS        prompt token ids, comma-separated, holding config.image_token_id exactly once (normally as
               <|vision_start|><|image_pad|><|vision_end|>); it is expanded to N_v copies as the processor does
    STEPS      greedy tokens to generate (full recomputation each step, no cache)
    --mask-from-layer L --masked P1,P2,...  the "pruned" forward: the listed positions of the EXPANDED prompt are
               removed as keys from decoder layer L on (L = 0: before the first layer; 0 <= L <= num_hidden_layers);
               every token keeps its own three positions. (Done by dropping those rows before layer L, which gives
               every other token exactly what key-masking gives it; the last prompt position cannot be masked.)
    --pixels   also print pixel_values
    --visionzip  also print the last ViT block's VisionZip-like signal (there is no [CLS] token): for each
               merged token, visionzip_received = the mean over its m*m patches of the attention each patch
               receives in that block (softmax over the keys it may see, averaged over heads, then the column
               mean over the queries that may see the patch: the whole image in a full-attention block, its
               window in a windowed one), and visionzip_keys = the mean of its patches' keys of that block
               (heads concatenated, after the qkv projection with its bias, before the rotary). The full
               [H, N, N] softmax in float64, merged-grid order.
  Prints one JSON object: pixel_shape [n_patches, C*T_p*p*p], grid_thw [t, h, w] (patches), n_v, resized_hw,
  image_embeds [N_v][D], position_ids [3][T] (the expanded prompt), first_logits [V] (last prompt position),
  greedy [STEPS], pixel_values with --pixels, visionzip_received [N_v] and visionzip_keys [N_v][width] with
  --visionzip.

  python3 qwen2_vl_reference.py --make-random OUT_DIR --arch qwen2|qwen2.5 --seed S [--new-layout] [--shards N]
                                [--tie 0|1]
    A tiny random checkpoint as Hugging Face publishes them (config.json field names of Qwen/Qwen2-VL-2B-Instruct
    and Qwen/Qwen2.5-VL-3B-Instruct: Qwen2-VL's vision_config has embed_dim + mlp_ratio and hidden_size = the LLM
    width, Qwen2.5-VL's has hidden_size = the ViT width, intermediate_size, out_hidden_size, window_size,
    fullatt_block_indexes; rope_scaling {"type": "mrope", "mrope_section"}), F32 safetensors (--shards N > 1:
    model-0000i-of-0000N.safetensors + index), preprocessor_config.json (min_pixels 56*56, max_pixels 28*28*64)
    and the tokenizer fixture of tests/reference/qwen_tokenizer (vocabulary 864 = the model's vocab_size; image
    pad 862, vision start / end 859 / 860). --new-layout writes the model.visual.* / model.language_model.* keys
    and a text_config block as transformers >= 4.52 saves. Tied embeddings by default for qwen2 (as the 2B), an
    lm_head for qwen2.5 (as the 7B); --tie overrides.

  python3 qwen2_vl_reference.py --self-check
    Makes both architectures (both key layouts), runs a 100x60 and a 250x180 image and checks: grids and N_v from
    smart_resize, pixel and embedding shapes, the window-reordered vision tower against a plain per-window
    attention mask, the last-block signal's shapes and sums (and, with the last block windowed, reordered ==
    masked), positions, an empty mask == the unmasked run bit for bit, masking from L == masking keys with
    -inf in an additive mask, and that a mask changes the logits only when it removes something.
"""
import argparse
import json
import math
import os
import struct
import sys
import tempfile

import torch
from PIL import Image

F64 = torch.float64
OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


# ---------------------------------------------------------------------------------------------------- checkpoints
def read_safetensors_file(path, out):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    kinds = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in kinds:
            raise SystemExit(f"{path}: unsupported dtype {info['dtype']} of {name}")
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=kinds[info["dtype"]]) if b > a else torch.zeros(0)
        out[name] = t.to(F64).reshape(info["shape"])


def canonical_key(name):
    """The older layout's key for either layout: model.visual.* -> visual.*, model.language_model.* -> model.*."""
    if name.startswith("model.visual."):
        return name[len("model."):]
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    return name


def load_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    raw = {}
    for name in files:
        read_safetensors_file(os.path.join(model_dir, name), raw)
    return {canonical_key(k): v for k, v in raw.items()}


def load_config(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    arch = (cfg.get("architectures") or [""])[0]
    if arch not in ("Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"):
        raise SystemExit(f"architecture {arch!r} is neither Qwen2VLForConditionalGeneration nor Qwen2_5_VL...")
    tc = {k: v for k, v in cfg.items() if k not in ("vision_config", "text_config")}
    tc.update(cfg.get("text_config") or {})
    rope = tc.get("rope_scaling") or tc.get("rope_parameters") or {}
    if "mrope_section" not in rope:
        raise SystemExit("config.json has no rope_scaling.mrope_section")
    if tc.get("use_sliding_window"):
        raise SystemExit("use_sliding_window true is not supported by this reference")
    tc["mrope_section"] = rope["mrope_section"]
    tc["rope_theta"] = rope.get("rope_theta", tc.get("rope_theta", 1000000.0))
    tc["tie_word_embeddings"] = cfg.get("tie_word_embeddings", tc.get("tie_word_embeddings", False))
    is25 = arch.startswith("Qwen2_5")
    tc.setdefault("rms_norm_eps", 1e-6 if is25 else 1e-5)  # the config classes' defaults
    vc = dict(cfg["vision_config"])
    pre_path = os.path.join(model_dir, "preprocessor_config.json")
    pre = json.load(open(pre_path)) if os.path.exists(pre_path) else {}
    ids = {k: cfg.get(k, tc.get(k)) for k in ("image_token_id", "vision_start_token_id", "vision_end_token_id")}
    return is25, tc, vc, pre, ids


# ---------------------------------------------------------------------------------------------- image processor
def read_ppm(path):
    with open(path, "rb") as f:
        if f.read(2) != b"P6":
            raise SystemExit(f"{path}: expected a binary PPM (P6)")
    return Image.open(path).convert("RGB")


def smart_resize(height, width, factor, min_pixels, max_pixels):
    if max(height, width) / min(height, width) > 200:
        raise SystemExit(f"absolute aspect ratio must be smaller than 200, got {height}x{width}")
    h_bar = round(height / factor) * factor  # Python round: half to even
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def preprocess(image, vc, pre):
    """PIL RGB image -> (pixel_values [n, C*T_p*p*p] float64, (t, h, w) in patches, (H, W) resized)."""
    p = pre.get("patch_size", vc.get("patch_size", 14))
    m = pre.get("merge_size", vc.get("spatial_merge_size", 2))
    tp = pre.get("temporal_patch_size", vc.get("temporal_patch_size", 2))
    size = pre.get("size") or {}
    min_px = pre.get("min_pixels") or size.get("shortest_edge") or 56 * 56
    max_px = pre.get("max_pixels") or size.get("longest_edge") or 28 * 28 * 1280
    width, height = image.size
    rh, rw = height, width
    if pre.get("do_resize", True):
        rh, rw = smart_resize(height, width, p * m, min_px, max_px)
        image = image.resize((rw, rh), resample=Image.BICUBIC)
    elif rh % (p * m) or rw % (p * m):
        raise SystemExit(f"do_resize false needs sides divisible by {p * m}, got {rh}x{rw}")
    x = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8).reshape(rh, rw, 3).to(F64)
    if pre.get("do_rescale", True):
        x = x * pre.get("rescale_factor", 1 / 255)
    if pre.get("do_normalize", True):
        x = (x - torch.tensor(pre.get("image_mean", OPENAI_CLIP_MEAN), dtype=F64)) / \
            torch.tensor(pre.get("image_std", OPENAI_CLIP_STD), dtype=F64)
    frames = x.permute(2, 0, 1)[None].expand(tp, 3, rh, rw)  # one image: the frame repeated in time
    gt, gh, gw = 1, rh // p, rw // p
    patches = frames.reshape(gt, tp, 3, gh // m, m, p, gw // m, m, p).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return patches.reshape(gt * gh * gw, 3 * tp * p * p).contiguous(), (gt, gh, gw), (rh, rw)


# ------------------------------------------------------------------------------------------------- shared blocks
def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def act(name, x):
    if name == "silu":
        return x * torch.sigmoid(x)
    if name == "quick_gelu":
        return x * torch.sigmoid(1.702 * x)
    if name == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name in ("gelu_pytorch_tanh", "gelu_new"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    raise SystemExit(f"unsupported activation {name}")


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def inv_freq(dim, theta):
    """1 / theta^(arange(0, dim, 2) / dim), computed in float32 as transformers does, then float64."""
    return (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))).to(F64)


def linear(W, name, x):
    y = x @ W[name + ".weight"].T
    return y + W[name + ".bias"] if name + ".bias" in W else y


# -------------------------------------------------------------------------------------------------- vision tower
def vision_positions(gh, gw, m):
    """(row, col) of each patch in the merge-blocked order of pixel_values: [N, 2]."""
    rows = torch.arange(gh)[:, None].expand(gh, gw).reshape(gh // m, m, gw // m, m).permute(0, 2, 1, 3).flatten()
    cols = torch.arange(gw)[None, :].expand(gh, gw).reshape(gh // m, m, gw // m, m).permute(0, 2, 1, 3).flatten()
    return torch.stack([rows, cols], -1)


def window_index(gt, gh, gw, m, window_merged):
    """Qwen2.5-VL get_window_index for one image: (order of the merged tokens window by window [N_v],
    window lengths in patches [n_windows], empty windows dropped)."""
    lh, lw = gh // m, gw // m
    index = torch.arange(gt * lh * lw).reshape(gt, lh, lw)
    pad_h = window_merged - lh % window_merged  # a whole empty window when lh divides evenly, as transformers pads
    pad_w = window_merged - lw % window_merged
    nh, nw = (lh + pad_h) // window_merged, (lw + pad_w) // window_merged
    padded = torch.nn.functional.pad(index, (0, pad_w, 0, pad_h), value=-100)
    padded = padded.reshape(gt, nh, window_merged, nw, window_merged).permute(0, 1, 3, 2, 4)
    padded = padded.reshape(gt, nh * nw, window_merged * window_merged)
    lengths = (padded != -100).sum(-1).reshape(-1)
    order = padded.reshape(-1)
    return order[order != -100], [int(n) * m * m for n in lengths if n > 0]


def attention_segments(q, k, v, lengths):
    """Bidirectional attention inside consecutive segments. q, k, v [H, N, D_h] -> [N, H * D_h]."""
    outs, at = [], 0
    for n in lengths:
        s = slice(at, at + n)
        a = ((q[:, s] @ k[:, s].transpose(-1, -2)) * q.shape[-1] ** -0.5).softmax(-1) @ v[:, s]
        outs.append(a)
        at += n
    return torch.cat(outs, 1).transpose(0, 1).reshape(q.shape[1], -1)


def vision_tower(W, vc, is25, pixels, grid, window_mask=None, signal=None):
    """pixel_values [N, C*T_p*p*p] -> image embeddings [N_v, D] in merged-grid (row-major) order.
    window_mask: for the self-check only, a [N, N] bool of allowed pairs used instead of reordering.
    signal: a dict to receive the last block's VisionZip-like signal per merged token (last_block_signal)."""
    gt, gh, gw = grid
    m = vc.get("spatial_merge_size", 2)
    width = vc["hidden_size"] if is25 else vc["embed_dim"]
    heads = vc["num_heads"]
    hd = width // heads
    conv = W["visual.patch_embed.proj.weight"]  # [width, C, T_p, p, p]
    x = pixels @ conv.reshape(conv.shape[0], -1).T
    n = x.shape[0]
    pos = vision_positions(gh, gw, m).repeat(gt, 1)
    freqs = torch.arange(max(gh, gw), dtype=F64)[:, None] * inv_freq(hd // 2, 10000.0)[None]  # [max, hd/4]
    rot = torch.cat([freqs[pos[:, 0]], freqs[pos[:, 1]]], -1)  # [N, hd/2]
    unit = m * m
    full = [gh * gw] * gt  # cu_seqlens: each frame on its own
    windows, order = full, None
    if is25 and window_mask is None:
        order, windows = window_index(gt, gh, gw, m, vc["window_size"] // m // vc["patch_size"])
        x = x.reshape(n // unit, unit, -1)[order].reshape(n, -1)
        rot = rot.reshape(n // unit, unit, -1)[order].reshape(n, -1)
    emb = torch.cat([rot, rot], -1)
    cos, sin = emb.cos(), emb.sin()
    full_blocks = set(vc.get("fullatt_block_indexes", [])) if is25 else set(range(vc["depth"]))
    for i in range(vc["depth"]):
        p = f"visual.blocks.{i}."
        if is25:
            h = rms_norm(x, W[p + "norm1.weight"], 1e-6)
        else:
            h = layer_norm(x, W[p + "norm1.weight"], W[p + "norm1.bias"], 1e-6)
        qkv = linear(W, p + "attn.qkv", h).reshape(n, 3, heads, hd).permute(1, 2, 0, 3)  # [3, H, N, hd]
        q, k, v = qkv[0] * cos + rotate_half(qkv[0]) * sin, qkv[1] * cos + rotate_half(qkv[1]) * sin, qkv[2]
        if signal is not None and i == vc["depth"] - 1:
            if window_mask is not None and i not in full_blocks:
                allowed = window_mask
            else:
                allowed = segment_pair_mask(full if i in full_blocks else windows)
            patch_order = None if order is None else (order[:, None] * unit + torch.arange(unit)).flatten()
            signal.update(last_block_signal(q, k, qkv[1], allowed, patch_order, unit))
        if window_mask is not None and i not in full_blocks:
            s = (q @ k.transpose(-1, -2)) * hd ** -0.5
            s = s.masked_fill(~window_mask, float("-inf"))
            a = (s.softmax(-1) @ v).transpose(0, 1).reshape(n, -1)
        else:
            a = attention_segments(q, k, v, full if i in full_blocks else windows)
        x = x + linear(W, p + "attn.proj", a)
        if is25:
            h = rms_norm(x, W[p + "norm2.weight"], 1e-6)
            g = act(vc.get("hidden_act", "silu"), linear(W, p + "mlp.gate_proj", h))
            x = x + linear(W, p + "mlp.down_proj", g * linear(W, p + "mlp.up_proj", h))
        else:
            h = layer_norm(x, W[p + "norm2.weight"], W[p + "norm2.bias"], 1e-6)
            x = x + linear(W, p + "mlp.fc2", act(vc.get("hidden_act", "quick_gelu"), linear(W, p + "mlp.fc1", h)))
    if is25:
        x = rms_norm(x, W["visual.merger.ln_q.weight"], 1e-6)
    else:
        x = layer_norm(x, W["visual.merger.ln_q.weight"], W["visual.merger.ln_q.bias"], 1e-6)
    x = x.reshape(n // unit, unit * width)
    x = linear(W, "visual.merger.mlp.2", act("gelu", linear(W, "visual.merger.mlp.0", x)))
    if order is not None:
        x = x[torch.argsort(order)]
    return x


def segment_pair_mask(lengths):
    """[N, N] bool: pairs of positions inside the same consecutive segment (cu_seqlens)."""
    seg = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    return seg[:, None] == seg[None, :]


def last_block_signal(q, k, k_plain, allowed, patch_order, unit):
    """VisionZip's signal for a tower without [CLS] (vispco's Qwen adaptation), the plain way: the full
    [H, N, N] softmax of one block (q, k [H, N, hd] after the rotary; allowed [N, N] the pairs that attend),
    averaged over heads; each patch's received attention = the mean of its column over the queries allowed to
    see it; keys = k_plain [H, N, hd] (before the rotary) with the heads concatenated. Both put back in
    pixel_values order (patch_order [N]: the original patch at each sequence position, or None) and averaged
    over each merged token's m*m consecutive patches -> received [N_v], keys [N_v, width], merged-grid order."""
    n, hd = q.shape[1], q.shape[-1]
    s = ((q @ k.transpose(-1, -2)) * hd ** -0.5).masked_fill(~allowed, float("-inf"))
    probs = s.softmax(-1).mean(0)  # [N, N]: query i's head-mean attention to key j
    received = probs.sum(0) / allowed.sum(0)
    keys = k_plain.transpose(0, 1).reshape(n, -1)
    if patch_order is not None:
        received = torch.zeros_like(received).index_copy(0, patch_order, received)
        keys = torch.zeros_like(keys).index_copy(0, patch_order, keys)
    return {"received": received.reshape(n // unit, unit).mean(1), "keys": keys.reshape(n // unit, unit, -1).mean(1)}


def window_pair_mask(grid, m, window_merged):
    """[N, N] bool: patch pairs in the same window, patches in pixel_values order (for the self-check)."""
    gt, gh, gw = grid
    pos = vision_positions(gh, gw, m).repeat(gt, 1)
    frame = torch.arange(gt).repeat_interleave(gh * gw)
    wid = (frame * 10 ** 6 + (pos[:, 0] // m // window_merged) * 10 ** 3 + pos[:, 1] // m // window_merged)
    return wid[:, None] == wid[None, :]


# ------------------------------------------------------------------------------------------------------- decoder
def rope_index(ids, grids, ids_cfg, m):
    """get_rope_index for one sequence: [3, T] positions."""
    image_id, start_id = ids_cfg["image_token_id"], ids_cfg["vision_start_token_id"]
    n_images = sum(1 for i in range(len(ids) - 1) if ids[i] == start_id and ids[i + 1] == image_id)
    if n_images == 0:
        return torch.arange(len(ids)).expand(3, -1).clone()
    parts, st = [], 0

    def next_free():
        return int(parts[-1].max()) + 1 if parts else 0

    for k in range(n_images):
        ed = ids.index(image_id, st)
        t, h, w = grids[k]
        lh, lw = h // m, w // m
        s = next_free()
        parts.append(torch.arange(ed - st).expand(3, -1) + s)
        ti = torch.arange(t).view(-1, 1).expand(-1, lh * lw).flatten()  # images: t = 1, the time index is 0
        hi = torch.arange(lh).view(1, -1, 1).expand(t, -1, lw).flatten()
        wi = torch.arange(lw).view(1, 1, -1).expand(t, lh, -1).flatten()
        parts.append(torch.stack([ti, hi, wi]) + (ed - st) + s)
        st = ed + t * lh * lw
    if st < len(ids):
        s = next_free()
        parts.append(torch.arange(len(ids) - st).expand(3, -1) + s)
    return torch.cat(parts, 1)


def mrope_cos_sin(pos, hd, theta, section):
    """pos [3, T] -> cos, sin [T, hd] with each frequency taking its axis from mrope_section."""
    if sum(section) != hd // 2:
        raise SystemExit(f"mrope_section {section} must sum to head_dim/2 = {hd // 2}")
    ang = pos.to(F64)[:, :, None] * inv_freq(hd, theta)[None, None]  # [3, T, hd/2]
    axis = torch.cat([torch.full((n,), a) for a, n in enumerate(section)])
    ang = ang[axis, :, torch.arange(hd // 2)].T  # [T, hd/2]: frequency j from axis[j]
    emb = torch.cat([ang, ang], -1)
    return emb.cos(), emb.sin()


def decoder_logits(W, tc, x, pos, keep_from=None, key_mask=None):
    """x [T, D] input embeddings, pos [3, T] -> logits [T', V] of the rows still present at the end.
    keep_from = (L, keep [T] bool): rows with keep false are dropped before layer L (the pruned forward).
    key_mask = (L, keep): instead, those columns get -inf from layer L on (the self-check's masked form)."""
    d, heads = tc["hidden_size"], tc["num_attention_heads"]
    kv = tc.get("num_key_value_heads", heads)
    hd, eps = d // heads, tc["rms_norm_eps"]
    cos, sin = mrope_cos_sin(pos, hd, tc["rope_theta"], tc["mrope_section"])
    causal = torch.ones(x.shape[0], x.shape[0], dtype=torch.bool).tril()
    for i in range(tc["num_hidden_layers"]):
        if keep_from is not None and i == keep_from[0]:
            keep = keep_from[1]
            x, cos, sin, causal = x[keep], cos[keep], sin[keep], causal[keep][:, keep]
        allowed = causal
        if key_mask is not None and i >= key_mask[0]:
            allowed = causal & key_mask[1][None, :] | torch.eye(causal.shape[0], dtype=torch.bool)
        T = x.shape[0]
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = linear(W, p + "self_attn.q_proj", h).reshape(T, heads, hd).transpose(0, 1)
        k = linear(W, p + "self_attn.k_proj", h).reshape(T, kv, hd).transpose(0, 1)
        v = linear(W, p + "self_attn.v_proj", h).reshape(T, kv, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(heads // kv, 0), v.repeat_interleave(heads // kv, 0)
        s = ((q @ k.transpose(-1, -2)) * hd ** -0.5).masked_fill(~allowed, float("-inf"))
        a = s.softmax(-1) @ v
        x = x + linear(W, p + "self_attn.o_proj", a.transpose(0, 1).reshape(T, d))
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = act(tc.get("hidden_act", "silu"), linear(W, p + "mlp.gate_proj", h))
        x = x + linear(W, p + "mlp.down_proj", g * linear(W, p + "mlp.up_proj", h))
    if keep_from is not None and keep_from[0] == tc["num_hidden_layers"]:
        x = x[keep_from[1]]
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if tc["tie_word_embeddings"] else W.get("lm_head.weight")
    if head is None:
        raise SystemExit("tie_word_embeddings is false but the checkpoint has no lm_head.weight")
    return x @ head.T


def expand_prompt(ids, image_id, n_v):
    if ids.count(image_id) != 1:
        raise SystemExit(f"the prompt must hold image_token_id {image_id} exactly once")
    at = ids.index(image_id)
    return ids[:at] + [image_id] * n_v + ids[at + 1:], at


def run(model_dir, image_path, ids_text, steps, mask_layer=None, masked=(), key_mask_form=False):
    is25, tc, vc, pre, ids_cfg = load_config(model_dir)
    W = load_weights(model_dir)
    pixels, grid, resized = preprocess(read_ppm(image_path), vc, pre)
    m = vc.get("spatial_merge_size", 2)
    signal = {}
    embeds = vision_tower(W, vc, is25, pixels, grid, signal=signal)
    n_v = embeds.shape[0]
    ids, at = expand_prompt([int(t) for t in ids_text.split(",")], ids_cfg["image_token_id"], n_v)
    n_prompt = len(ids)
    if steps < 1:
        raise SystemExit("STEPS must be at least 1 (first_logits come from the first step)")
    if mask_layer is not None:
        if not 0 <= mask_layer <= tc["num_hidden_layers"]:
            raise SystemExit(f"--mask-from-layer must be in [0, {tc['num_hidden_layers']}]")
        if any(not 0 <= q < n_prompt - 1 for q in masked):
            raise SystemExit(f"--masked positions must be in [0, {n_prompt - 1}) (the last prompt position is kept)")
    table = W["model.embed_tokens.weight"]
    # Generated tokens continue at max + 1 on all three axes (transformers' rope_deltas in decoding), whatever
    # they are (a generated <|vision_start|><|image_pad|> is no image).
    pos0 = rope_index(ids, [grid], ids_cfg, m)
    greedy, first = [], None
    for step in range(steps):
        x = table[ids].clone()
        x[at:at + n_v] = embeds
        pos = torch.cat([pos0, (int(pos0.max()) + 1 + torch.arange(step)).expand(3, -1)], 1)
        rule = None
        if mask_layer is not None:
            keep = torch.ones(len(ids), dtype=torch.bool)
            keep[list(masked)] = False
            rule = (mask_layer, keep)
        if key_mask_form:
            logits = decoder_logits(W, tc, x, pos, key_mask=rule)[-1]
        else:
            logits = decoder_logits(W, tc, x, pos, keep_from=rule)[-1]
        first = logits if first is None else first
        ids.append(int(logits.argmax()))
        greedy.append(ids[-1])
    return {"pixel_shape": list(pixels.shape), "grid_thw": list(grid), "n_v": n_v, "resized_hw": list(resized),
            "image_embeds": embeds, "position_ids": pos0, "first_logits": first, "greedy": greedy,
            "pixel_values": pixels, "visionzip_received": signal["received"], "visionzip_keys": signal["keys"]}


# ------------------------------------------------------------------------------------------------ random models
def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].to(torch.float32).contiguous().numpy().tobytes()  # little-endian on x86 / arm
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_random(out_dir, arch, seed, new_layout=False, shards=1, tie=None):
    g = torch.Generator().manual_seed(seed)
    is25 = arch == "qwen2.5"
    tie = (not is25) if tie is None else bool(tie)
    D, L, H, KV, I, V = 64, 3, 4, 2, 96, 864  # LLM: width, layers, heads (D_h 16), kv heads, MLP, vocabulary
    VD, VH, depth = 32, 2, 4  # ViT: width, heads (D_h 16), blocks
    W = {}

    def rnd(name, *shape, std=None):
        std = 1.0 / math.sqrt(shape[-1]) if std is None else std
        W[name] = torch.randn(*shape, generator=g, dtype=F64) * std

    def norm(name, n, bias=False):
        W[name + ".weight"] = 1.0 + 0.1 * torch.randn(n, generator=g, dtype=F64)
        if bias:
            W[name + ".bias"] = 0.1 * torch.randn(n, generator=g, dtype=F64)

    def lin(name, n_in, n_out, bias=True):
        rnd(name + ".weight", n_out, n_in)
        if bias:
            rnd(name + ".bias", n_out, std=0.1)

    rnd("visual.patch_embed.proj.weight", VD, 3, 2, 14, 14, std=1.0 / math.sqrt(3 * 2 * 14 * 14))
    for i in range(depth):
        p = f"visual.blocks.{i}."
        norm(p + "norm1", VD, bias=not is25)
        norm(p + "norm2", VD, bias=not is25)
        lin(p + "attn.qkv", VD, 3 * VD)
        lin(p + "attn.proj", VD, VD)
        if is25:
            lin(p + "mlp.gate_proj", VD, 48)
            lin(p + "mlp.up_proj", VD, 48)
            lin(p + "mlp.down_proj", 48, VD)
        else:
            lin(p + "mlp.fc1", VD, VD * 2)
            lin(p + "mlp.fc2", VD * 2, VD)
    norm("visual.merger.ln_q", VD, bias=not is25)
    lin("visual.merger.mlp.0", 4 * VD, 4 * VD)
    lin("visual.merger.mlp.2", 4 * VD, D)
    rnd("model.embed_tokens.weight", V, D, std=1.0)
    for i in range(L):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm", D)
        norm(p + "post_attention_layernorm", D)
        lin(p + "self_attn.q_proj", D, D)
        lin(p + "self_attn.k_proj", D, KV * D // H)
        lin(p + "self_attn.v_proj", D, KV * D // H)
        lin(p + "self_attn.o_proj", D, D, bias=False)
        lin(p + "mlp.gate_proj", D, I, bias=False)
        lin(p + "mlp.up_proj", D, I, bias=False)
        lin(p + "mlp.down_proj", I, D, bias=False)
    norm("model.norm", D)
    if not tie:
        lin("lm_head", D, V, bias=False)

    text = {"hidden_act": "silu", "hidden_size": D, "intermediate_size": I, "max_position_embeddings": 32768,
            "max_window_layers": L, "num_attention_heads": H, "num_hidden_layers": L, "num_key_value_heads": KV,
            "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": False,
            "vocab_size": V, "attention_dropout": 0.0, "initializer_range": 0.02, "bos_token_id": 856,
            "eos_token_id": 858}
    rope = {"type": "mrope", "mrope_section": [2, 3, 3]}
    if is25:
        vision = {"depth": depth, "hidden_act": "silu", "hidden_size": VD, "intermediate_size": 48, "num_heads": VH,
                  "in_chans": 3, "out_hidden_size": D, "patch_size": 14, "spatial_merge_size": 2,
                  "spatial_patch_size": 14, "window_size": 112, "fullatt_block_indexes": [1, 3],
                  "tokens_per_second": 2, "temporal_patch_size": 2}
    else:
        vision = {"depth": depth, "embed_dim": VD, "mlp_ratio": 2, "num_heads": VH, "in_chans": 3,
                  "hidden_size": D, "hidden_act": "quick_gelu", "patch_size": 14, "spatial_merge_size": 2,
                  "spatial_patch_size": 14, "temporal_patch_size": 2}
    cfg = {"architectures": ["Qwen2_5_VLForConditionalGeneration" if is25 else "Qwen2VLForConditionalGeneration"],
           "model_type": "qwen2_5_vl" if is25 else "qwen2_vl", **text, "vision_start_token_id": 859,
           "vision_end_token_id": 860, "vision_token_id": 861, "image_token_id": 862, "video_token_id": 863,
           "tie_word_embeddings": tie, "torch_dtype": "float32", "vision_config": vision, "rope_scaling": rope}
    if new_layout:
        cfg["text_config"] = {**text, "model_type": cfg["model_type"] + "_text", "tie_word_embeddings": tie,
                              "rope_scaling": {"mrope_section": [2, 3, 3], "rope_type": "default",
                                               "type": "default"}}
        W = {("model." + k if k.startswith("visual.") else
              "model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in W.items()}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    pre = {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 64, "patch_size": 14, "temporal_patch_size": 2,
           "merge_size": 2, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
           "image_processor_type": "Qwen2VLImageProcessor",
           "processor_class": "Qwen2_5_VLProcessor" if is25 else "Qwen2VLProcessor"}
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    names = sorted(W)
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), W)
    else:
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = names[s::shards]
            write_safetensors(os.path.join(out_dir, file), {k: W[k] for k in part})
            weight_map.update({k: file for k in part})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 4 * sum(v.numel() for v in W.values())},
                       "weight_map": weight_map}, f, indent=2)
    tok_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qwen_tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tok_dir, name), "rb") as src, open(os.path.join(out_dir, name), "wb") as dst:
            dst.write(src.read())


# ----------------------------------------------------------------------------------------------------- self-check
def write_ppm(path, w, h, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    base = torch.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), (xx + yy) % 256], -1)
    noise = torch.randint(0, 64, (h, w, 3), generator=g)
    img = ((base + noise) % 256).to(torch.uint8)
    with open(path, "wb") as f:
        f.write(f"P6\n{w} {h}\n255\n".encode() + img.numpy().tobytes())


def self_check():
    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            raise SystemExit(1)

    with tempfile.TemporaryDirectory() as tmp:
        images = {}
        for w, h, expect in ((100, 60, ((56, 112), (1, 4, 8), 8)), (250, 180, ((168, 252), (1, 12, 18), 54))):
            path = os.path.join(tmp, f"{w}x{h}.ppm")
            write_ppm(path, w, h, seed=w)
            images[path] = expect
        for arch, layout, shards in (("qwen2", False, 1), ("qwen2.5", True, 2), ("qwen2.5", False, 1)):
            model = os.path.join(tmp, f"{arch}-{layout}")
            make_random(model, arch, seed=3, new_layout=layout, shards=shards)
            is25, tc, vc, pre, ids_cfg = load_config(model)
            for path, (hw, grid, n_v) in images.items():
                name = f"{arch} {'new' if layout else 'old'} layout, {os.path.basename(path)}"
                # <|im_start|> x <|vision_start|> <|image_pad|> <|vision_end|> y z
                prompt = "857,40,859,862,860,41,42"
                r = run(model, path, prompt, 3)
                check(r["resized_hw"] == list(hw) and r["grid_thw"] == list(grid) and r["n_v"] == n_v,
                      f"{name}: resized {r['resized_hw']}, grid {r['grid_thw']}, N_v {r['n_v']}")
                check(r["pixel_shape"] == [grid[1] * grid[2], 1176] and list(r["image_embeds"].shape) == [n_v, 64],
                      f"{name}: pixel_values {r['pixel_shape']}, image_embeds {list(r['image_embeds'].shape)}")
                pos = r["position_ids"]
                lh, lw = grid[1] // 2, grid[2] // 2
                check(pos.shape[1] == 6 + n_v and pos[:, 3].tolist() == [3, 3, 3] and
                      pos[:, 2 + n_v].tolist() == [3, 3 + lh - 1, 3 + lw - 1] and
                      pos[:, 3 + n_v].tolist() == [3 + max(lh, lw)] * 3,
                      f"{name}: M-RoPE positions (image at 3, text after at {3 + max(lh, lw)})")
                W = load_weights(model)
                pixels, grid_, _ = preprocess(read_ppm(path), vc, pre)
                sig = {}
                vision_tower(W, vc, is25, pixels, grid_, signal=sig)
                check(list(sig["received"].shape) == [n_v] and list(sig["keys"].shape) == [n_v, 32] and
                      abs(sig["received"].sum().item() * 4 - 1) < 1e-12,
                      f"{name}: last-block signal [N_v], [N_v, 32]; received sums to 1 over the patches")
                if is25:
                    # The last block windowed: the window-reordered signal == the plain per-window mask's, and
                    # each window's patches receive 1 in all.
                    last_windowed = dict(vc, fullatt_block_indexes=[1])
                    wm = window_pair_mask(grid_, 2, vc["window_size"] // 2 // 14)
                    a, b = {}, {}
                    vision_tower(W, last_windowed, is25, pixels, grid_, signal=a)
                    vision_tower(W, last_windowed, is25, pixels, grid_, window_mask=wm, signal=b)
                    diff = max((a[k] - b[k]).abs().max().item() for k in a)
                    n_windows = len(window_index(*grid_, 2, vc["window_size"] // 2 // 14)[1])
                    check(diff < 1e-12 and abs(a["received"].sum().item() * 4 - n_windows) < 1e-12,
                          f"{name}: windowed last block: reordered signal == per-window mask (max diff "
                          f"{diff:.1e}), received sums to {n_windows} window(s)")
                    ref = vision_tower(W, vc, is25, pixels, grid_,
                                       window_mask=window_pair_mask(grid_, 2, vc["window_size"] // 2 // 14))
                    diff = (ref - r["image_embeds"]).abs().max().item()
                    check(diff < 1e-12, f"{name}: window reordering == per-window mask (max diff {diff:.1e})")
                    every = dict(vc, fullatt_block_indexes=list(range(vc["depth"])))
                    spread = (vision_tower(W, every, is25, pixels, grid_) - ref).abs().max().item()
                    windows = len(window_index(*grid_, 2, vc["window_size"] // 2 // 14)[1])
                    check((spread > 1e-6) == (windows > 1),
                          f"{name}: {windows} window(s); all-full attention differs by {spread:.1e}")
                empty = run(model, path, prompt, 3, mask_layer=1, masked=[])
                check(torch.equal(empty["first_logits"], r["first_logits"]) and empty["greedy"] == r["greedy"],
                      f"{name}: empty mask == unmasked")
                some = [3, 4, 3 + n_v // 2]
                for layer in (0, 2, tc["num_hidden_layers"]):
                    a = run(model, path, prompt, 3, mask_layer=layer, masked=some)
                    b = run(model, path, prompt, 3, mask_layer=layer, masked=some, key_mask_form=True)
                    diff = (a["first_logits"] - b["first_logits"]).abs().max().item()
                    change = (a["first_logits"] - r["first_logits"]).abs().max().item()
                    moved = change > 1e-6 if layer < tc["num_hidden_layers"] else change < 1e-12
                    check(diff < 1e-12 and a["greedy"] == b["greedy"] and moved,
                          f"{name}: mask from layer {layer}: dropped == key-masked (max diff {diff:.1e}), "
                          f"logits moved by {change:.2e}")
    print("self-check passed")


# ------------------------------------------------------------------------------------------------------------ CLI
def main():
    if "--self-check" in sys.argv[1:]:
        self_check()
        return
    if "--make-random" in sys.argv[1:]:
        ap = argparse.ArgumentParser()
        ap.add_argument("--make-random", required=True, metavar="OUT_DIR")
        ap.add_argument("--arch", required=True, choices=["qwen2", "qwen2.5"])
        ap.add_argument("--seed", type=int, required=True)
        ap.add_argument("--new-layout", action="store_true")
        ap.add_argument("--shards", type=int, default=1)
        ap.add_argument("--tie", type=int, choices=[0, 1])
        a = ap.parse_args()
        make_random(a.make_random, a.arch, a.seed, a.new_layout, a.shards, a.tie)
        return
    ap = argparse.ArgumentParser(usage=__doc__.split("Usage:")[1].split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("image")
    ap.add_argument("ids")
    ap.add_argument("steps", type=int)
    ap.add_argument("--mask-from-layer", type=int)
    ap.add_argument("--masked", default="")
    ap.add_argument("--pixels", action="store_true")
    ap.add_argument("--visionzip", action="store_true")
    a = ap.parse_args()
    masked = [int(t) for t in a.masked.split(",") if t.strip()]
    if masked and a.mask_from_layer is None:
        raise SystemExit("--masked needs --mask-from-layer")
    torch.set_num_threads(1)
    r = run(a.model_dir, a.image, a.ids, a.steps, a.mask_from_layer, masked)
    wanted = {"pixel_values": a.pixels, "visionzip_received": a.visionzip, "visionzip_keys": a.visionzip}
    out = {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in r.items() if wanted.get(k, True)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
