#!/usr/bin/env python3
"""Independent float64 reference of the Hugging Face LLaVA-NeXT forward, for
tests/model/test_llava_next_reference.cpp.

Written from transformers v4.52's semantics (LlavaNextImageProcessor: select_best_resolution,
get_patch_output_size, _pad_for_patching, divide_to_patches; LlavaNextForConditionalGeneration:
image_size_to_num_patches, get_anyres_image_grid_shape, pack_image_features, unpad_image), sharing no code
with vispco. The CLIP tower, the projector, the Llama decoder and the greedy loop are llava_reference.py's (the
LLaVA-1.5 reference beside this file). AnyRes is done here: the best resolution, the padded canvas (black, the image
centred with the odd remainder right/bottom), the tiles row-major, CLIP normalisation, each picture through the
tower up to vision_feature_layer ([CLS] dropped), the projector, then the packing with view / permute / slicing /
cat as transformers writes it, and the positions whose id is image_token_index replaced by the packed features.

Usage: python3 llava_next_reference.py MODEL_DIR HEIGHT WIDTH BASE.ppm RESIZED.ppm IDS STEPS
  HEIGHT WIDTH  the original image's size, pixels
  BASE.ppm      the image resized to image_size x image_size (binary P6)
  RESIZED.ppm   the image resized to get_patch_output_size (binary P6); the reference checks that size, pads it
                and cuts the tiles. (The resizes themselves are not redone: PIL's and OpenCV's bicubic differ, so
                the comparison starts after them, as in llava_reference.py.)
  IDS           the prompt token ids, comma-separated, holding one image_token_index
  STEPS         greedy tokens to generate (full recomputation each step, no cache)
Prints one JSON object: image_embeds [N_v][D], n_tiles, first_logits [V], greedy [STEPS].
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llava_reference import greedy_decode, projector, read_ppm, read_safetensors, vision_features  # noqa: E402


def select_best_resolution(original_size, possible_resolutions):
    original_height, original_width = original_size
    best_fit, max_effective, min_wasted = None, 0, float("inf")
    for height, width in possible_resolutions:
        scale = min(width / original_width, height / original_height)
        dw, dh = int(original_width * scale), int(original_height * scale)
        effective = min(dw * dh, original_width * original_height)
        wasted = width * height - effective
        if effective > max_effective or (effective == max_effective and wasted < min_wasted):
            max_effective, min_wasted, best_fit = effective, wasted, (height, width)
    return best_fit


def patch_output_size(original_size, target):
    oh, ow = original_size
    th, tw = target
    scale_w, scale_h = tw / ow, th / oh
    if scale_w < scale_h:
        return min(math.ceil(oh * scale_w), th), tw
    return th, min(math.ceil(ow * scale_h), tw)


def pad_for_patching(image, target):  # image [h, w, 3] float64 0..255
    th, tw = target
    h, w = image.shape[:2]
    px, rx = divmod(tw - w, 2)
    py, ry = divmod(th - h, 2)
    out = torch.zeros(th, tw, 3, dtype=torch.float64)
    out[py:py + h, px:px + w] = image
    assert py + h + py + ry == th and px + w + px + rx == tw
    return out


def normalise(rgb, pre):  # [S, S, 3] 0..255 → [1, 3, S, S]
    mean = torch.tensor(pre["image_mean"], dtype=torch.float64)
    std = torch.tensor(pre["image_std"], dtype=torch.float64)
    return ((rgb / 255.0 - mean) / std).permute(2, 0, 1).unsqueeze(0)


def unpad_image(tensor, original_size):
    original_height, original_width = original_size
    current_height, current_width = tensor.shape[1:]
    if original_width / original_height > current_width / current_height:
        new_height = int(round(original_height * (current_width / original_width), 7))
        padding = (current_height - new_height) // 2
        return tensor[:, padding:current_height - padding, :]
    new_width = int(round(original_width * (current_height / original_height), 7))
    padding = (current_width - new_width) // 2
    return tensor[:, :, padding:current_width - padding]


def pack(features, original_size, pinpoints, image_size, patch_size, newline):
    # features [1 + T, n*n, D]: the base image's, then the tiles' row-major.
    base, tiles = features[0], features[1:]
    n = image_size // patch_size
    best_h, best_w = select_best_resolution(original_size, pinpoints)
    rows, cols = best_h // image_size, best_w // image_size
    x = tiles.view(rows, cols, n, n, -1).permute(4, 0, 2, 1, 3).contiguous()
    x = x.flatten(1, 2).flatten(2, 3)  # [D, rows*n, cols*n]
    x = unpad_image(x, original_size)
    x = torch.cat((x, newline[:, None, None].expand(*x.shape[:-1], 1)), dim=-1)
    x = x.flatten(1, 2).transpose(0, 1)
    return torch.cat((base, x), dim=0)


def main():
    model_dir, height, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    base_ppm, resized_ppm, ids_text, steps = sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    pre = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    vc, tc = cfg["vision_config"], cfg["text_config"]
    size, patch = vc["image_size"], vc["patch_size"]
    pinpoints = cfg["image_grid_pinpoints"]
    image_id = cfg.get("image_token_index", cfg.get("image_token_id"))

    best = select_best_resolution((height, width), pinpoints)
    resized = read_ppm(resized_ppm)
    if tuple(resized.shape[:2]) != patch_output_size((height, width), best):
        raise SystemExit(f"RESIZED.ppm is {tuple(resized.shape[:2])}, expected "
                         f"{patch_output_size((height, width), best)} for best resolution {best}")
    canvas = pad_for_patching(resized, best)
    pictures = [read_ppm(base_ppm)]
    for i in range(0, best[0], size):  # divide_to_patches: row-major
        for j in range(0, best[1], size):
            pictures.append(canvas[i:i + size, j:j + size])
    if len(pictures) != 1 + (best[0] // size) * (best[1] // size):
        raise SystemExit("tile count disagrees with image_size_to_num_patches")
    layer = cfg.get("vision_feature_layer", -2)
    strategy = cfg.get("vision_feature_select_strategy", "default")
    features = torch.stack([projector(W, cfg, vision_features(W, vc, normalise(p, pre), layer, strategy))
                            for p in pictures])  # [1 + T, n*n, D]
    embeds = pack(features, (height, width), pinpoints, size, patch, W["image_newline"])

    first, greedy = greedy_decode(W, tc, embeds, ids_text, image_id, steps)
    print(json.dumps({"image_embeds": embeds.tolist(), "n_tiles": len(pictures) - 1,
                      "first_logits": first.tolist(), "greedy": greedy}))


if __name__ == "__main__":
    main()
