// Glyph value loss (see glyph_value_loss.h).
#include "train/losses/glyph_value_loss.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <set>

#include "core/errors.h"

namespace vispco::train {

GlyphValueTargets glyph_value_targets(const TeacherForcedBatch& batch, const at::Tensor& patch_glyphs) {
  GlyphValueTargets out;
  for (int64_t b = 0; b < batch.batch(); ++b) {
    const auto& map = batch.maps[b];
    const auto cls = patch_glyphs[b].cpu();
    const auto ca = cls.accessor<int64_t, 1>();
    std::set<int64_t> seen;
    for (int64_t patch = 0; patch < cls.size(0); ++patch)
      if (ca[patch] > 0 && map.key(patch) >= 0 && seen.insert(map.key(patch)).second) {
        out.flat.push_back(b * batch.T + map.key(patch));
        out.classes.push_back(ca[patch] - 1);
      }
  }
  return out;
}

at::Tensor glyph_value_loss(LlamaDecoderLayerImpl& layer, const at::Tensor& layer_input,
                            const GlyphValueTargets& targets, int64_t group, int64_t d_head,
                            torch::nn::Linear head) {
  if (targets.empty()) throw InvalidArgument("glyph_value_loss: no visual token shows a glyph");
  const auto& h = layer_input;
  const auto x =
      h.reshape({-1, h.size(-1)}).index_select(0, at::tensor(targets.flat, at::kLong).to(h.device()));
  const auto v = layer.self_attn->v_proj(layer.input_layernorm(x)).narrow(-1, group * d_head, d_head);
  return torch::nn::functional::cross_entropy(head->forward(v.to(at::kFloat)),
                                              at::tensor(targets.classes, at::kLong).to(h.device()));
}

}  // namespace vispco::train
