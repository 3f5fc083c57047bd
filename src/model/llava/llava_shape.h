// LLaVA-1.5's shape and FLOPs spec (model/shape.h, cost/flops.h) from its config: CLIP ViT tower at
// image_size/patch_size patches, 2-layer MLP projector, Llama decoder.
#pragma once
#include "cost/flops.h"
#include "model/llava/config.h"
#include "model/shape.h"

namespace vispco {

/// Per-image encoder FLOPs and decoder dimensions of a LLaVA-1.5 model (FLOPs conventions of cost/flops.h):
/// patch conv 2·grid²·D_v·(C·p²); n_vision_layers_used() CLIP layers at grid² + 1 tokens (the tower always
/// runs [CLS]); projector linear_1 + linear_2 at N_v tokens 2·N_v·(D_v·D + D·D).
FlopsSpec llava_flops_spec(const LlavaConfig& cfg);

/// The shape code outside model/ reads (architecture "LlavaForConditionalGeneration").
ModelShape llava_shape(const LlavaConfig& cfg);

}  // namespace vispco
