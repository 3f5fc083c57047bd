// Gathering the surviving tokens of a TokenState.
#include "model/token_state.h"

#include <ATen/ATen.h>

namespace vispco {

TokenState gather_tokens(const TokenState& s, const at::Tensor& keep) {
  TORCH_CHECK(keep.dim() == 2 && keep.size(0) == s.hidden.size(0),
              "gather_tokens: keep must be [B, T'], got ", keep.sizes());
  TokenState out;
  out.hidden = s.hidden.gather(1, keep.unsqueeze(-1).expand({keep.size(0), keep.size(1), s.hidden.size(2)}));
  out.positions = s.positions.gather(1, keep);
  out.valid = s.valid.gather(1, keep);
  out.visual = s.visual.gather(1, keep);
  out.grid_index = s.grid_index.gather(1, keep);
  return out;
}

}  // namespace vispco
