#!/usr/bin/env python3
"""Writes a Hugging Face LLaVA-1.5 folder as a llama.cpp GGUF pair (text model + mmproj), the way llama.cpp's
converters lay them out, from the format spec (ggml docs/gguf.md) and without vispco or the gguf package:

- text model: convert_hf_to_gguf.py for Llama — general.architecture "llama", llama.* keys, blk.N.* names,
  q/k rows permuted by LlamaModel.permute (RoPE pairs interleaved), tokenizer.ggml.* from tokenizer.model;
- mmproj: examples/llava/convert_image_encoder_to_gguf.py — general.architecture "clip", clip.* keys, v.* / mm.*
  names (CLIP's fc1 named ffn_down, fc2 ffn_up), and, as the legacy llava path does, the tower cut after the
  layer LLaVA reads (vision_feature_layer) with clip.vision.block_count = the layers kept.

Usage: hf_to_gguf.py HF_DIR TEXT.gguf MMPROJ.gguf [--f16 | --bf16]   (Debian python3 with python3-torch)
2-D weights are written F32, or F16 with --f16, or BF16 (ggml type 30) with --bf16 (1-D tensors always F32, as the
converters do).
"""
import json
import os
import struct
import sys

import torch

GGUF_U32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_I32 = 4, 6, 7, 8, 9, 5
ALIGN = 32


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
        out[name] = t.to(torch.float32)
    return out


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def proto_fields(b):
    """(field, wire type, value) of a protobuf message (varint, 32-bit, 64-bit and length-delimited)."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 5:
            v, i = struct.unpack("<f", b[i:i + 4])[0], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        out.append((field, wire, v))
    return out


def read_sentencepiece(path):
    """Pieces, scores, types and special ids of a SentencePiece ModelProto (sentencepiece_model.proto)."""
    top = proto_fields(open(path, "rb").read())
    pieces, scores, types = [], [], []
    for field, _, v in top:
        if field == 1:
            p = {f: val for f, _, val in proto_fields(v)}
            pieces.append(p.get(1, b"").decode("utf-8"))
            scores.append(p.get(2, 0.0))
            types.append(p.get(3, 1))
    ids = {"unk": 0, "bos": 1, "eos": 2, "pad": -1}
    for field, _, v in top:
        if field == 2:  # trainer_spec
            for f, _, val in proto_fields(v):
                for name, num in (("unk", 40), ("bos", 41), ("eos", 42), ("pad", 43)):
                    if f == num:
                        ids[name] = val if val < 2**31 else val - 2**64
    return pieces, scores, types, ids


class Writer:
    def __init__(self):
        self.kv = bytearray()
        self.n_kv = 0
        self.tensors = []

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _key(self, key, t):
        self.kv += self._str(key) + struct.pack("<I", t)
        self.n_kv += 1

    def u32(self, key, v):
        self._key(key, GGUF_U32)
        self.kv += struct.pack("<I", v)

    def f32(self, key, v):
        self._key(key, GGUF_F32)
        self.kv += struct.pack("<f", v)

    def boolean(self, key, v):
        self._key(key, GGUF_BOOL)
        self.kv += struct.pack("<B", 1 if v else 0)

    def string(self, key, v):
        self._key(key, GGUF_STRING)
        self.kv += self._str(v)

    def array(self, key, elem_type, values):
        self._key(key, GGUF_ARRAY)
        self.kv += struct.pack("<IQ", elem_type, len(values))
        for v in values:
            if elem_type == GGUF_STRING:
                self.kv += self._str(v)
            elif elem_type == GGUF_F32:
                self.kv += struct.pack("<f", v)
            elif elem_type == GGUF_I32:
                self.kv += struct.pack("<i", v)
            else:
                self.kv += struct.pack("<I", v)

    def tensor(self, name, t, f16=False):
        """f16: False (F32), True or "f16" (F16, ggml type 1), "bf16" (BF16, ggml type 30); 2-D tensors only."""
        t = t.detach().to(torch.float32).contiguous()
        ggml_type = 0
        if f16 and t.dim() >= 2:
            ggml_type = 30 if f16 == "bf16" else 1
        if ggml_type == 30:
            data = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        else:
            data = (t.to(torch.float16) if ggml_type == 1 else t).numpy().tobytes()
        self.tensors.append((name, list(t.shape), ggml_type, data))

    def write(self, path):
        pad = lambda n: (n + ALIGN - 1) // ALIGN * ALIGN
        head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), self.n_kv)) + self.kv
        offset = 0
        for name, shape, ggml_type, data in self.tensors:
            head += self._str(name) + struct.pack("<I", len(shape))
            for d in reversed(shape):  # ggml order: innermost dimension first
                head += struct.pack("<Q", d)
            head += struct.pack("<IQ", ggml_type, offset)
            offset = pad(offset + len(data))
        head += b"\0" * (pad(len(head)) - len(head))
        with open(path, "wb") as f:
            f.write(head)
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * (pad(len(data)) - len(data)))


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    f16 = "bf16" if "--bf16" in sys.argv else ("--f16" in sys.argv)
    if len(args) != 3:
        sys.exit(__doc__)
    hf, text_path, mmproj_path = args
    cfg = json.load(open(os.path.join(hf, "config.json")))
    tc, vc = cfg["text_config"], cfg["vision_config"]
    w = read_safetensors(os.path.join(hf, "model.safetensors"))
    w = {k.replace("model.language_model.", "language_model.model.").replace("model.vision_tower.", "vision_tower.")
         .replace("model.multi_modal_projector.", "multi_modal_projector."): v for k, v in w.items()}
    if "lm_head.weight" in w:
        w["language_model.lm_head.weight"] = w.pop("lm_head.weight")
    n_head = tc.get("num_attention_heads", 32)
    n_kv = tc.get("num_key_value_heads", n_head)
    hidden = tc.get("hidden_size", 4096)
    n_layer = tc.get("num_hidden_layers", 32)

    t = Writer()
    t.string("general.architecture", "llama")
    t.u32("llama.context_length", tc.get("max_position_embeddings", 2048))
    t.u32("llama.embedding_length", hidden)
    t.u32("llama.feed_forward_length", tc.get("intermediate_size", 11008))
    t.u32("llama.block_count", n_layer)
    t.u32("llama.attention.head_count", n_head)
    t.u32("llama.attention.head_count_kv", n_kv)
    t.f32("llama.attention.layer_norm_rms_epsilon", tc.get("rms_norm_eps", 1e-6))
    t.f32("llama.rope.freq_base", tc.get("rope_theta", 10000.0))
    t.u32("llama.rope.dimension_count", tc.get("head_dim", hidden // n_head))
    pieces, scores, types, ids = read_sentencepiece(os.path.join(hf, "tokenizer.model"))
    # As convert_hf_to_gguf.py's LlamaModel: rows of the embedding past the tokenizer's pieces (config
    # vocab_size larger than tokenizer.model) become "[PAD<i>]" tokens of type UNUSED (5), score 0.
    n_rows = w["language_model.model.embed_tokens.weight"].shape[0]
    for i in range(len(pieces), n_rows):
        pieces.append("[PAD%d]" % i)
        scores.append(0.0)
        types.append(5)
    t.string("tokenizer.ggml.model", "llama")
    t.array("tokenizer.ggml.tokens", GGUF_STRING, pieces)
    t.array("tokenizer.ggml.scores", GGUF_F32, scores)
    t.array("tokenizer.ggml.token_type", GGUF_I32, types)
    t.u32("tokenizer.ggml.bos_token_id", ids["bos"])
    t.u32("tokenizer.ggml.eos_token_id", ids["eos"])
    t.u32("tokenizer.ggml.unknown_token_id", ids["unk"])
    lm = "language_model.model."
    t.tensor("token_embd.weight", w[lm + "embed_tokens.weight"], f16)
    t.tensor("output_norm.weight", w[lm + "norm.weight"])
    if "language_model.lm_head.weight" in w:
        t.tensor("output.weight", w["language_model.lm_head.weight"], f16)
    for i in range(n_layer):
        h, g = "%slayers.%d." % (lm, i), "blk.%d." % i
        t.tensor(g + "attn_norm.weight", w[h + "input_layernorm.weight"])
        t.tensor(g + "ffn_norm.weight", w[h + "post_attention_layernorm.weight"])
        t.tensor(g + "attn_q.weight", permute(w[h + "self_attn.q_proj.weight"], n_head), f16)
        t.tensor(g + "attn_k.weight", permute(w[h + "self_attn.k_proj.weight"], n_kv), f16)
        t.tensor(g + "attn_v.weight", w[h + "self_attn.v_proj.weight"], f16)
        t.tensor(g + "attn_output.weight", w[h + "self_attn.o_proj.weight"], f16)
        t.tensor(g + "ffn_gate.weight", w[h + "mlp.gate_proj.weight"], f16)
        t.tensor(g + "ffn_up.weight", w[h + "mlp.up_proj.weight"], f16)
        t.tensor(g + "ffn_down.weight", w[h + "mlp.down_proj.weight"], f16)
    t.write(text_path)

    m = Writer()
    n_vis = vc.get("num_hidden_layers", 12)
    feature_layer = cfg.get("vision_feature_layer", -2)
    kept = feature_layer if feature_layer >= 0 else n_vis + 1 + feature_layer  # layers LLaVA reads
    m.string("general.architecture", "clip")
    m.boolean("clip.has_text_encoder", False)
    m.boolean("clip.has_vision_encoder", True)
    m.boolean("clip.has_llava_projector", True)
    m.string("clip.projector_type", "mlp")
    m.u32("clip.vision.image_size", vc.get("image_size", 224))
    m.u32("clip.vision.patch_size", vc.get("patch_size", 32))
    m.u32("clip.vision.embedding_length", vc.get("hidden_size", 768))
    m.u32("clip.vision.feed_forward_length", vc.get("intermediate_size", 3072))
    m.u32("clip.vision.projection_dim", 0)
    m.u32("clip.vision.attention.head_count", vc.get("num_attention_heads", 12))
    m.f32("clip.vision.attention.layer_norm_epsilon", vc.get("layer_norm_eps", 1e-5))
    m.u32("clip.vision.block_count", kept)
    pre_path = os.path.join(hf, "preprocessor_config.json")
    pre = json.load(open(pre_path)) if os.path.exists(pre_path) else {}
    m.array("clip.vision.image_mean", GGUF_F32, pre.get("image_mean", [0.48145466, 0.4578275, 0.40821073]))
    m.array("clip.vision.image_std", GGUF_F32, pre.get("image_std", [0.26862954, 0.26130258, 0.27577711]))
    m.boolean("clip.use_gelu", vc.get("hidden_act", "quick_gelu") == "gelu")
    vm = "vision_tower.vision_model."
    m.tensor("mm.0.weight", w["multi_modal_projector.linear_1.weight"], f16)
    m.tensor("mm.0.bias", w["multi_modal_projector.linear_1.bias"])
    m.tensor("mm.2.weight", w["multi_modal_projector.linear_2.weight"], f16)
    m.tensor("mm.2.bias", w["multi_modal_projector.linear_2.bias"])
    m.tensor("v.class_embd", w[vm + "embeddings.class_embedding"])
    m.tensor("v.patch_embd.weight", w[vm + "embeddings.patch_embedding.weight"], f16)
    m.tensor("v.position_embd.weight", w[vm + "embeddings.position_embedding.weight"], f16)
    for s in ("weight", "bias"):
        m.tensor("v.pre_ln." + s, w[vm + "pre_layrnorm." + s])
    names = [("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
             ("self_attn.out_proj", "attn_out"), ("layer_norm1", "ln1"), ("layer_norm2", "ln2"),
             ("mlp.fc1", "ffn_down"), ("mlp.fc2", "ffn_up")]
    for i in range(kept):
        for hf_name, gg in names:
            for s in ("weight", "bias"):
                m.tensor("v.blk.%d.%s.%s" % (i, gg, s), w["%sencoder.layers.%d.%s.%s" % (vm, i, hf_name, s)], f16)
    m.write(mmproj_path)


if __name__ == "__main__":
    main()
