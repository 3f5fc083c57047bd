// Answer-token targets of a prefilled multimodal batch.
#include "model/answer_targets.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/errors.h"

namespace vispco {

at::Tensor answer_targets(const std::vector<VlmRequest>& reqs,
                          const std::vector<std::vector<int64_t>>& answer_pos, int64_t image_token_index,
                          int64_t n_v, int64_t T) {
  const auto B = static_cast<int64_t>(reqs.size());
  auto target = at::full({B, T}, -100, at::kLong);
  auto t = target.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& ids = reqs[b].prompt_ids;
    const auto it = std::find(ids.begin(), ids.end(), image_token_index);
    if (it == ids.end()) throw InvalidArgument("answer_targets: a prompt has no image placeholder");
    const int64_t p = it - ids.begin();
    const int64_t len = static_cast<int64_t>(ids.size()) - 1 + n_v, pad = T - len;
    for (auto i : answer_pos[b]) {
      const int64_t e = pad + (i < p ? i : i + n_v - 1);  // expanded index of ids[i]
      t[b][e - 1] = ids[i];                               // predicted from the position before it
    }
  }
  return target;
}

}  // namespace vispco
