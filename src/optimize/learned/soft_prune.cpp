// Training-mode FastV soft pruning with straight-through masks (VisPCO §3.2).
#include "optimize/learned/soft_prune.h"

#include <ATen/ATen.h>

#include "core/errors.h"

namespace vispco::optimize::learned {

SoftPruneHook::SoftPruneHook(at::Tensor fractions, at::Tensor visual_pos, at::Tensor query_pos,
                             int64_t first_layer, SoftThresholdOptions opts)
    : fractions_(std::move(fractions)),
      visual_pos_(std::move(visual_pos)),
      query_pos_(std::move(query_pos)),
      first_(first_layer),
      opts_(opts) {
  opts_.validate();
  const int64_t B = fractions_.size(0);
  if (fractions_.dim() != 2 || visual_pos_.dim() != 2 || visual_pos_.size(0) != B || query_pos_.dim() != 1 ||
      query_pos_.size(0) != B)
    throw InvalidArgument("SoftPruneHook: expected fractions [B, L], visual_pos [B, N_v], query_pos [B]");
  if (first_ < 1 || first_ >= fractions_.size(1))
    throw InvalidArgument("SoftPruneHook: first pruned layer must be in [1, L), got " +
                          std::to_string(first_));
  n_visual_ = visual_pos_.size(1);
  alive_ = at::ones({B, n_visual_}, visual_pos_.options().dtype(at::kBool));
}

at::Tensor SoftPruneHook::attention_rows(int64_t layer, const TokenState& state) const {
  if (layer + 1 < first_ || layer + 1 >= fractions_.size(1)) return {};
  return query_pos_.view({-1, 1});
}

at::Tensor SoftPruneHook::gate(int64_t layer, const TokenState& state, const at::Tensor& attn_rows) {
  const int64_t B = fractions_.size(0);
  if (layer < first_) {
    counts_.push_back(at::full({B}, n_visual_, at::TensorOptions().dtype(at::kLong)));
    return {};
  }
  TORCH_CHECK(attn_rows.defined(), "SoftPruneHook: no attention rows from layer ", layer - 1);
  auto scores = fastv_log_scores(attn_rows, visual_pos_, alive_);
  auto keep = fractions_.select(1, layer).to(at::kFloat) * double(n_visual_);
  auto m = soft_keep_mask(scores, alive_, keep, opts_);
  mask_ = mask_.defined() ? m.ste * mask_ : m.ste;
  alive_ = m.hard > 0.5;
  counts_.push_back(alive_.sum(1).cpu());
  const int64_t T = state.hidden.size(1);
  auto ones = at::ones({B, T}, mask_.options());
  return ones.scatter(1, visual_pos_, mask_);
}

at::Tensor SoftPruneHook::hard_counts() const {
  return counts_.empty() ? at::Tensor() : at::stack(counts_, 1);
}

}  // namespace vispco::optimize::learned
