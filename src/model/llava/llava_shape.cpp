// LLaVA-1.5 shape and FLOPs spec; formulas in llava_shape.h.
#include "model/llava/llava_shape.h"

#include "model/decoder_flops.h"

namespace vispco {

FlopsSpec llava_flops_spec(const LlavaConfig& cfg) {
  const auto& v = cfg.vision;
  const auto& t = cfg.text;
  FlopsSpec f;
  f.n_visual_tokens = cfg.n_visual_tokens();
  const int64_t n_patches = v.grid() * v.grid();
  f.vision_patch_embed = 2 * n_patches * v.hidden_size * (v.num_channels * v.patch_size * v.patch_size);
  f.vision_layers =
      cfg.n_vision_layers_used() * vision_layer_flops(v.hidden_size, v.intermediate_size, n_patches + 1);
  const int64_t n_v = f.n_visual_tokens;
  f.projector = 2 * n_v * v.hidden_size * t.hidden_size + 2 * n_v * t.hidden_size * t.hidden_size;
  f.decoder = decoder_flops_spec(t);
  return f;
}

ModelShape llava_shape(const LlavaConfig& cfg) {
  ModelShape s;
  s.architecture = "LlavaForConditionalGeneration";
  s.n_visual_tokens = cfg.n_visual_tokens();
  s.grid_rows = s.grid_cols = cfg.vision.grid();
  s.has_cls_token = cfg.vision_feature_select_strategy == "full";
  s.position_axes = cfg.text.position_axes();
  s.n_layers = cfg.text.num_hidden_layers;
  s.hidden_size = cfg.text.hidden_size;
  s.vocab_size = cfg.text.vocab_size;
  s.max_positions = cfg.text.max_position_embeddings;
  s.image_token_id = cfg.image_token_index;
  s.bos_token_id = cfg.text.bos_token_id;
  s.vision_hidden_size = cfg.vision.hidden_size;
  s.n_vision_layers = cfg.n_vision_layers_used();
  s.image_size = cfg.vision.image_size;
  s.num_channels = cfg.vision.num_channels;
  s.flops = llava_flops_spec(cfg);
  return s;
}

}  // namespace vispco
