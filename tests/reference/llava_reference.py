#!/usr/bin/env python3
"""Independent float64 reference of the Hugging Face LLaVA-1.5 forward, for tests/model/test_llava_reference.cpp.

Written from transformers' semantics (LlavaForConditionalGeneration, CLIPVisionModel, LlamaForCausalLM), sharing
no code with vispco: its own safetensors reader, CLIP preprocessing, vision tower up to `vision_feature_layer`
(hidden_states[0] is the pre-layernorm output, hidden_states[i] the output of encoder layer i), [CLS] dropped
for the "default" strategy, the projector linear_1 → GELU (erf) → linear_2, the positions whose id equals
config.image_token_index replaced by the N_v image features (whatever that id is: inside or after the
SentencePiece vocabulary), then Llama: RMSNorm, rotate-half RoPE with theta, grouped-query attention by
repeating key/value heads, SwiGLU, untied or tied lm_head. Everything in float64.

Usage: python3 llava_reference.py MODEL_DIR IMAGE.ppm IDS STEPS
  IMAGE.ppm  a binary PPM (P6) image of exactly the model's image_size (the reference does no resizing: CLIP's
             bicubic resize differs between PIL and OpenCV, so the comparison starts after it)
  IDS        the prompt token ids, comma-separated, holding one image_token_index
  STEPS      greedy tokens to generate (full recomputation each step, no cache)
Prints one JSON object: image_embeds [N_v][D], first_logits [V] (the last prompt position), greedy [STEPS].
"""
import json
import math
import os
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = bytearray(data[a:b])
        dt = info["dtype"]
        if dt == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif dt == "F16":
            t = torch.frombuffer(raw, dtype=torch.float16)
        elif dt == "BF16":
            t = torch.frombuffer(raw, dtype=torch.bfloat16)
        else:
            raise SystemExit(f"unsupported dtype {dt} of {name}")
        out[name] = t.to(torch.float64).reshape(info["shape"])
    return out


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:  # magic, width, height, maxval, separated by whitespace
        while data[pos:pos + 1].isspace():
            pos += 1
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    if fields[0] != b"P6" or int(fields[3]) != 255:
        raise SystemExit("expected a binary 8-bit PPM (P6)")
    w, h = int(fields[1]), int(fields[2])
    pixels = torch.frombuffer(bytearray(data[pos + 1:pos + 1 + w * h * 3]), dtype=torch.uint8)
    return pixels.reshape(h, w, 3).to(torch.float64)  # RGB


def clip_pixels(rgb, pre, size):
    if rgb.shape[0] != size or rgb.shape[1] != size:
        raise SystemExit(f"the reference takes images of exactly {size}x{size}")
    x = rgb / 255.0
    mean = torch.tensor(pre["image_mean"], dtype=torch.float64)
    std = torch.tensor(pre["image_std"], dtype=torch.float64)
    return ((x - mean) / std).permute(2, 0, 1).unsqueeze(0)  # [1, 3, S, S]


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def act(name, x):
    if name == "quick_gelu":
        return x * torch.sigmoid(1.702 * x)
    if name == "gelu":  # erf form
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "silu":
        return x * torch.sigmoid(x)
    raise SystemExit(f"unsupported activation {name}")


def vision_features(W, vc, pixels, feature_layer, strategy):
    p, d, heads = vc["patch_size"], vc["hidden_size"], vc["num_attention_heads"]
    eps = vc.get("layer_norm_eps", 1e-5)
    pre = "vision_tower.vision_model."
    conv = W[pre + "embeddings.patch_embedding.weight"]  # [D, 3, p, p]
    n = pixels.shape[-1] // p
    patches = pixels.reshape(1, 3, n, p, n, p).permute(0, 2, 4, 1, 3, 5).reshape(n * n, 3 * p * p)
    x = patches @ conv.reshape(d, -1).T  # [N, D], row-major over the grid
    x = torch.cat([W[pre + "embeddings.class_embedding"][None], x], 0)
    x = x + W[pre + "embeddings.position_embedding.weight"]
    x = layer_norm(x, W[pre + "pre_layrnorm.weight"], W[pre + "pre_layrnorm.bias"], eps)
    hidden = [x]
    hd = d // heads
    for i in range(vc["num_hidden_layers"]):
        q_ = f"{pre}encoder.layers.{i}."
        lin = lambda name, t: t @ W[q_ + name + ".weight"].T + W[q_ + name + ".bias"]
        h = layer_norm(x, W[q_ + "layer_norm1.weight"], W[q_ + "layer_norm1.bias"], eps)
        q = lin("self_attn.q_proj", h).reshape(-1, heads, hd).transpose(0, 1) * hd ** -0.5
        k = lin("self_attn.k_proj", h).reshape(-1, heads, hd).transpose(0, 1)
        v = lin("self_attn.v_proj", h).reshape(-1, heads, hd).transpose(0, 1)
        a = (q @ k.transpose(-1, -2)).softmax(-1) @ v
        x = x + lin("self_attn.out_proj", a.transpose(0, 1).reshape(-1, d))
        h = layer_norm(x, W[q_ + "layer_norm2.weight"], W[q_ + "layer_norm2.bias"], eps)
        x = x + lin("mlp.fc2", act(vc.get("hidden_act", "quick_gelu"), lin("mlp.fc1", h)))
        hidden.append(x)
    feats = hidden[feature_layer]
    if strategy == "default":
        feats = feats[1:]
    elif strategy != "full":
        raise SystemExit(f"unknown vision_feature_select_strategy {strategy}")
    return feats


def projector(W, cfg, feats):
    def lin(name, t):
        y = t @ W[f"multi_modal_projector.{name}.weight"].T
        bias = W.get(f"multi_modal_projector.{name}.bias")
        return y if bias is None else y + bias
    return lin("linear_2", act(cfg.get("projector_hidden_act", "gelu"), lin("linear_1", feats)))


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def llama_logits(W, tc, x):
    d, heads = tc["hidden_size"], tc["num_attention_heads"]
    kv = tc.get("num_key_value_heads", heads)
    hd, eps, T = d // heads, tc.get("rms_norm_eps", 1e-6), x.shape[0]
    inv = 1.0 / (tc.get("rope_theta", 10000.0) ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(t):  # [H, T, hd]
        t1, t2 = t[..., : hd // 2], t[..., hd // 2:]
        return t * cos + torch.cat([-t2, t1], -1) * sin

    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    pre = "language_model.model."
    for i in range(tc["num_hidden_layers"]):
        p = f"{pre}layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = rope((h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, heads, hd).transpose(0, 1))
        k = rope((h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, kv, hd).transpose(0, 1))
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, kv, hd).transpose(0, 1)
        k, v = k.repeat_interleave(heads // kv, 0), v.repeat_interleave(heads // kv, 0)
        a = ((q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask).softmax(-1) @ v
        x = x + a.transpose(0, 1).reshape(T, d) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = act(tc.get("hidden_act", "silu"), h @ W[p + "mlp.gate_proj.weight"].T)
        x = x + (g * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    x = rms(x, W[pre + "norm.weight"], eps)
    head = W.get("language_model.lm_head.weight", W[pre + "embed_tokens.weight"])  # tied when absent
    return x @ head.T


def greedy_decode(W, tc, embeds, ids_text, image_id, steps):
    """The prompt IDS (comma-separated, one image_id) with its image position replaced by embeds [N_v, D], then
    `steps` greedy tokens by full recomputation. Returns (first_logits [V] at the last prompt position, the
    greedy token ids)."""
    ids = [int(t) for t in ids_text.split(",")]
    if ids.count(image_id) != 1:
        raise SystemExit(f"the prompt must hold image_token_index {image_id} once")
    table = W["language_model.model.embed_tokens.weight"]
    greedy, first = [], None
    for _ in range(steps):
        at = ids.index(image_id)
        x = torch.cat([table[ids[:at]], embeds, table[ids[at + 1:]]], 0)
        logits = llama_logits(W, tc, x)[-1]
        if first is None:
            first = logits
        ids.append(int(logits.argmax()))
        greedy.append(ids[-1])
    return first, greedy


def main():
    model_dir, image, ids_text, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    pre = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    vc, tc = cfg["vision_config"], cfg["text_config"]
    image_id = cfg.get("image_token_index", cfg.get("image_token_id"))
    pixels = clip_pixels(read_ppm(image), pre, vc["image_size"])
    embeds = projector(W, cfg, vision_features(W, vc, pixels, cfg.get("vision_feature_layer", -2),
                                               cfg.get("vision_feature_select_strategy", "default")))
    first, greedy = greedy_decode(W, tc, embeds, ids_text, image_id, steps)
    print(json.dumps({"image_embeds": embeds.tolist(), "first_logits": first.tolist(), "greedy": greedy}))


if __name__ == "__main__":
    main()
