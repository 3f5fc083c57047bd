// Gathering the surviving tokens of a TokenState.
#include "model/token_state.h"

#include <ATen/ATen.h>

namespace vispco {

TokenState gather_tokens(const TokenState& s, const at::Tensor& keep) {
  TORCH_CHECK(keep.dim() == 2 && keep.size(0) == s.hidden.size(0),
              "gather_tokens: keep must be [B, T'], got ", keep.sizes());
  TokenState out;
  out.hidden = s.hidden.gather(1, keep.unsqueeze(-1).expand({keep.size(0), keep.size(1), s.hidden.size(2)}));
  out.positions =
      s.positions.dim() == 3
          ? s.positions.gather(2, keep.unsqueeze(0).expand({s.positions.size(0), keep.size(0), keep.size(1)}))
          : s.positions.gather(1, keep);
  out.valid = s.valid.gather(1, keep);
  out.visual = s.visual.gather(1, keep);
  out.grid_index = s.grid_index.gather(1, keep);
  return out;
}

int64_t position_axes(const at::Tensor& positions) { return positions.dim() == 3 ? positions.size(0) : 1; }

int64_t position_batch_dim(const at::Tensor& positions) { return positions.dim() == 3 ? 1 : 0; }

at::Tensor next_positions(const at::Tensor& positions) {
  if (positions.dim() == 2) return positions.narrow(1, positions.size(1) - 1, 1) + 1;  // ascending per row
  TORCH_CHECK(positions.dim() == 3, "next_positions: positions must be [B, T] or [A, B, T], got ",
              positions.sizes());
  auto next = std::get<0>(positions.amax(2, /*keepdim=*/true).max(0, /*keepdim=*/true)) + 1;  // [1, B, 1]
  return next.expand({positions.size(0), positions.size(1), 1}).contiguous();
}

}  // namespace vispco
