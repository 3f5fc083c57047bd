// Word-level grounding loss (see word_grounding_loss.h).
#include "train/losses/word_grounding_loss.h"

#include <ATen/ATen.h>

#include "core/errors.h"

namespace vispco::train {

at::Tensor word_grounding_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                                 const std::vector<std::vector<std::vector<int64_t>>>& turn_patches) {
  auto target = at::zeros({batch.batch(), rows.R, batch.T}, at::kBool);
  auto ta = target.accessor<bool, 3>();
  for (int64_t b = 0; b < batch.batch(); ++b) {
    const auto& map = batch.maps[b];
    int64_t r = 0;
    for (const auto& [i, t] : batch.object_words[b]) {
      for (auto patch : turn_patches[b][t])
        if (map.key(patch) >= 0) ta[b][r][map.key(patch)] = true;
      ++r;
    }
  }
  return target;
}

at::Tensor grounding_loss(const std::vector<at::Tensor>& probs, const at::Tensor& target) {
  for (const auto& p : probs)
    if (target.dim() != 3 || p.dim() != 4 || p.size(0) != target.size(0) || p.size(2) != target.size(1) ||
        p.size(3) != target.size(2))
      throw InvalidArgument("grounding_loss: attention rows [B, H, R, T] must match the target [B, R, T]");
  const auto has = target.any(-1);  // [B, R]
  const int64_t n = has.sum().item<int64_t>();
  if (n == 0 || probs.empty()) return at::zeros({}, at::kFloat);
  std::vector<at::Tensor> terms;
  for (const auto& p : probs) {
    auto mass = (p.select(1, 0) * target.to(p.scalar_type())).sum(-1);  // [B, R]
    terms.push_back(-(mass.clamp_min(1e-6).log() * has.to(mass.scalar_type())).sum() /
                    static_cast<double>(n));
  }
  return at::stack(terms).mean();
}

}  // namespace vispco::train
