// The token loss of stage 2 (see token_loss.h).
#include "train/losses/token_loss.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

namespace vispco::train {

namespace {

// Each token's original position, padding sent to the dummy column `dummy`.
at::Tensor positions_of(const TokenState& s, int64_t dummy) {
  return at::where(s.valid, s.positions, at::full_like(s.positions, dummy));
}

}  // namespace

at::Tensor token_loss(const at::Tensor& logits, const at::Tensor& target) {
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), target.reshape({-1}).to(logits.device()),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

PositionTargets::PositionTargets(const TokenState& state, const at::Tensor& target) {
  const int64_t width = state.positions.max().item<int64_t>() + 2, dummy = width - 1;
  by_position_ = at::full({state.positions.size(0), width}, -100, at::kLong);
  by_position_.scatter_(1, positions_of(state, dummy).cpu(), target.cpu());
  by_position_.select(1, dummy).fill_(-100);
}

at::Tensor PositionTargets::at(const TokenState& survivors) const {
  return by_position_.gather(1, positions_of(survivors, by_position_.size(1) - 1).cpu());
}

}  // namespace vispco::train
