// Answer-row readout loss (see readout_loss.h).
#include "train/losses/readout_loss.h"

#include <ATen/ATen.h>

#include <cmath>

namespace vispco::train {

at::Tensor readout_target(const TeacherForcedBatch& batch, const QueryRows& rows,
                          const std::vector<std::vector<AnswerGrounding>>& turn_answers) {
  auto target = at::full({batch.batch(), rows.R, 3}, NAN, at::kFloat);
  auto ro = target.accessor<float, 3>();
  for (int64_t b = 0; b < batch.batch(); ++b)
    for (size_t t = 0; t < batch.answer_rows[b].size(); ++t)
      for (int k = 0; k < 3; ++k)
        ro[b][rows.first_answer[b] + static_cast<int64_t>(t)][k] =
            turn_answers[b][t].readout[static_cast<size_t>(k)];
  return target;
}

at::Tensor readout_loss(torch::nn::Linear head, const at::Tensor& hidden, const at::Tensor& target) {
  const auto has = target.isnan().logical_not();
  if (!has.any().item<bool>()) return at::zeros({}, target.options());
  const auto pred = head->forward(hidden);  // [B, R, 3]
  return (pred - target.nan_to_num()).pow(2).masked_select(has).mean();
}

}  // namespace vispco::train
