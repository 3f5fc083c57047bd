// K-predictor features (see k_features.h).
#include "prune/auto_keep/k_features.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace vispco {

int64_t k_feature_width(const ModelShape& shape) { return 2 * shape.hidden_size + 2; }

at::Tensor k_features(VisionLanguageModel& m, const VisualTokens& vt,
                      const std::vector<std::string>& questions) {
  c10::InferenceMode guard;
  if (!vt.cls_attention.defined())
    throw InvalidArgument(
        "k features: the vision tower's [CLS] attention is needed (encode_images(..., true))");
  const int64_t B = vt.embeds.size(0), n_v = vt.embeds.size(1);
  if (static_cast<int64_t>(questions.size()) != B)
    throw InvalidArgument("k features: one question per image expected");
  if (vt.ragged()) {  // images of different N_v: each over its own tokens, not the zero padding
    std::vector<at::Tensor> rows;
    for (int64_t b = 0; b < B; ++b) rows.push_back(k_features(m, vt.row(b, m.shape()), {questions[b]}));
    return torch::cat(rows, 0);
  }
  auto visual = vt.embeds.to(at::kFloat).mean(1);  // [B, D]
  std::vector<at::Tensor> q;
  for (const auto& text : questions) {
    auto ids = m.tokenizer().encode(text, false);
    if (ids.empty()) {
      q.push_back(torch::zeros({visual.size(1)}));
      continue;
    }
    auto t = torch::tensor(ids, torch::kLong).to(vt.embeds.device()).unsqueeze(0);
    q.push_back(m.language_model()->embed(t).to(at::kFloat).mean(1).squeeze(0).cpu());
  }
  auto question = torch::stack(q).to(visual.device());  // [B, D]
  auto a = vt.cls_attention.to(at::kFloat);
  a = a / a.sum(1, true).clamp_min(1e-12);  // [B, N_v]
  auto entropy = -(a * (a.clamp_min(1e-12)).log()).sum(1, true) / std::log(static_cast<double>(n_v));
  const int64_t top = std::max<int64_t>(1, n_v / 10);
  auto top_mass = std::get<0>(a.topk(top, 1)).sum(1, true);
  return torch::cat({visual, question, entropy, top_mass}, 1).cpu().contiguous();
}

}  // namespace vispco
