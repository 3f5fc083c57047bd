// Received attention and the patch → merged-token means of the Qwen towers' VisionZip signal; see
// vision_received.h.
#include "model/qwen2_vl/vision_received.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace vispco {

at::Tensor received_attention(const at::Tensor& q, const at::Tensor& k, const std::vector<int64_t>& lengths,
                              int64_t budget_bytes) {
  TORCH_CHECK(q.dim() == 3 && q.sizes() == k.sizes(), "received_attention: expected q, k [N, H, D_h], got ",
              q.sizes(), " and ", k.sizes());
  const int64_t N = q.size(0), H = q.size(1), Dh = q.size(2);
  int64_t total = 0;
  for (const auto n : lengths) {
    TORCH_CHECK(n > 0, "received_attention: empty segment");
    total += n;
  }
  TORCH_CHECK(total == N, "received_attention: segments sum to ", total, " but the sequence has ", N,
              " tokens");
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  auto qf = q.to(at::kFloat).permute({1, 0, 2});  // [H, N, D_h]
  auto kf = k.to(at::kFloat).permute({1, 0, 2});
  auto out = at::empty({N}, qf.options());
  int64_t start = 0;
  for (const auto len : lengths) {
    auto qs = qf.narrow(1, start, len), ks_t = kf.narrow(1, start, len).transpose(1, 2);  // [H, D_h, L]
    auto sum = at::zeros({len}, qf.options());
    const int64_t chunk = attention_query_chunk(1, H, len, budget_bytes);
    for (int64_t t0 = 0; t0 < len; t0 += chunk) {
      const int64_t c = std::min(chunk, len - t0);
      auto probs = (at::matmul(qs.narrow(1, t0, c), ks_t) * scale).softmax(-1);  // [H, c, L]
      sum += probs.sum(at::IntArrayRef{0, 1});
    }
    out.narrow(0, start, len).copy_(sum / static_cast<double>(H * len));
    start += len;
  }
  return out;
}

at::Tensor qwen_merged_grid_order(const at::Tensor& x, const at::Tensor& order) {
  if (!order.defined()) return x;
  return at::empty_like(x).index_copy_(0, order.to(x.device()), x);
}

at::Tensor qwen_merged_token_mean(const at::Tensor& per_patch, int64_t unit, const at::Tensor& order) {
  TORCH_CHECK(per_patch.dim() >= 1 && unit >= 1 && per_patch.size(0) % unit == 0,
              "qwen_merged_token_mean: ", per_patch.size(0), " patches are not a multiple of ", unit);
  auto sizes = per_patch.sizes().vec();
  sizes[0] /= unit;
  sizes.insert(sizes.begin() + 1, unit);
  return qwen_merged_grid_order(per_patch.to(at::kFloat).reshape(sizes).mean(1), order);
}

}  // namespace vispco
