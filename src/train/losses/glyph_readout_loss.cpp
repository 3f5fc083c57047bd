// Glyph readout loss (see glyph_readout_loss.h).
#include "train/losses/glyph_readout_loss.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

namespace vispco::train {

at::Tensor glyph_readout_target(const TeacherForcedBatch& batch, const QueryRows& rows) {
  auto target = at::full({batch.batch(), rows.R}, -100, at::kLong);
  auto go = target.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch.batch(); ++b)
    for (size_t j = 0; j < batch.glyph_rows[b].size(); ++j)
      go[b][rows.first_glyph[b] + static_cast<int64_t>(j)] = batch.glyph_rows[b][j].token;
  return target;
}

at::Tensor glyph_readout_loss(LlamaForCausalLMImpl& lm, const at::Tensor& hidden, const at::Tensor& target) {
  if (!target.ge(0).any().item<bool>()) return at::zeros({}, target.options().dtype(at::kFloat));
  const auto lens = lm.logits(lm.model->norm(hidden));  // [B, R, V] fp32
  return torch::nn::functional::cross_entropy(
      lens.reshape({-1, lens.size(-1)}), target.view({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace vispco::train
