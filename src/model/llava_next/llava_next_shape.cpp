// LLaVA-NeXT shape and FLOPs spec; formulas in llava_next_shape.h.
#include "model/llava_next/llava_next_shape.h"

#include "model/llava/llava_shape.h"
#include "model/llava_next/anyres.h"

namespace vispco {

FlopsSpec llava_next_flops_spec(const LlavaNextConfig& cfg) {
  // LLaVA-1.5's spec is one picture through the same tower and projector ("default" strategy: N = n²).
  const FlopsSpec one = llava_flops_spec(cfg.llava);
  const int64_t pictures = 1 + anyres_max_tiles(cfg);
  FlopsSpec f = one;
  f.n_visual_tokens = anyres_largest_layout(cfg).n_tokens;
  f.vision_patch_embed = pictures * one.vision_patch_embed;
  f.vision_layers = pictures * one.vision_layers;
  f.projector = pictures * one.projector;
  return f;
}

FlopsSpec llava_next_image_flops(const LlavaNextConfig& cfg, int64_t height, int64_t width) {
  const FlopsSpec one = llava_flops_spec(cfg.llava);
  const AnyresGeometry g = anyres_geometry(height, width, cfg);
  const int64_t pictures = 1 + g.n_tiles();
  FlopsSpec f = one;
  f.n_visual_tokens = g.n_tokens();
  f.vision_patch_embed = pictures * one.vision_patch_embed;
  f.vision_layers = pictures * one.vision_layers;
  f.projector = pictures * one.projector;
  return f;
}

ModelShape llava_next_shape(const LlavaNextConfig& cfg) {
  ModelShape s = llava_shape(cfg.llava);
  s.architecture = "LlavaNextForConditionalGeneration";
  const VisualLayout largest = anyres_largest_layout(cfg);
  s.n_visual_tokens = largest.n_tokens;
  s.grid_rows = largest.grid_rows;
  s.grid_cols = largest.grid_cols;
  s.has_cls_token = false;
  s.flops = llava_next_flops_spec(cfg);
  return s;
}

}  // namespace vispco
