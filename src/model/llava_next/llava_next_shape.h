// LLaVA-NeXT's shape and FLOPs spec (model/shape.h, cost/flops.h) from its config: the CLIP tower runs once
// per tile plus once for the base image, the projector on all of their features, and the decoder sees the
// packed tokens (model/llava_next/pack.h).
#pragma once
#include "cost/flops.h"
#include "model/llava_next/config.h"
#include "model/shape.h"

namespace vispco {

/// Per-image encoder FLOPs of the largest image (1 + anyres_max_tiles() pictures through the tower) and the
/// decoder's dimensions, in cost/flops.h's conventions: patch conv (1 + T)·2·n²·D_v·(C·p²); the used CLIP
/// layers at n² + 1 tokens, (1 + T) times; the projector on every picture's n² features (transformers
/// projects before packing) (1 + T)·2·n²·(D_v·D + D·D); n_visual_tokens = the largest N_v. An image of fewer
/// tiles costs less in the tower; the spec, one value per model, states the worst case.
FlopsSpec llava_next_flops_spec(const LlavaNextConfig& cfg);

/// FLOPs spec of one height × width image: its AnyRes geometry (anyres.h) gives N_v = n² + rows·(cols + 1)
/// and 1 + tiles pictures through the tower and projector (each as llava_flops_spec's one picture).
/// @throws InvalidArgument as anyres_geometry (non-positive size).
FlopsSpec llava_next_image_flops(const LlavaNextConfig& cfg, int64_t height, int64_t width);

/// The shape code outside model/ reads (architecture "LlavaNextForConditionalGeneration"): n_visual_tokens
/// and the grid are those of the largest image (anyres_largest_layout: default_layout() is that image's
/// layout); image_size is the tile side. Each image's own layout comes with its visual tokens
/// (VisualTokens::layouts; AnyresGeometry::layout() says what its grid indices mean).
ModelShape llava_next_shape(const LlavaNextConfig& cfg);

}  // namespace vispco
