// K-predictor features of dataset samples (see k_features.h).
#include "optimize/dynamic_k/k_features.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>

#include "core/errors.h"
#include "cost/timer.h"
#include "io/image.h"

namespace vispco::optimize {

DatasetFeatures dataset_k_features(VisionLanguageModel& m, const eval::Dataset& ds,
                                   const std::vector<size_t>& indices, size_t batch) {
  if (batch < 1) throw InvalidArgument("k features: batch must be ≥ 1");
  c10::InferenceMode guard;
  DatasetFeatures out;
  std::vector<at::Tensor> parts;
  for (size_t b = 0; b < indices.size(); b += batch) {
    const size_t e = std::min(indices.size(), b + batch);
    Stopwatch tower;
    std::vector<at::Tensor> px;
    std::vector<std::string> questions;
    for (size_t j = b; j < e; ++j) {
      const auto& s = ds.samples.at(indices[j]);
      px.push_back(m.preprocess(io::load_image_rgb(s.image_path)));
      questions.push_back(s.question);
    }
    auto vt = m.encode_image_list(px, true);  // images may differ in N_v
    out.tower_ms += tower.ms();
    Stopwatch feat;
    parts.push_back(k_features(m, vt, questions));
    out.feature_ms += feat.ms();
  }
  out.features = parts.empty() ? torch::zeros({0, k_feature_width(m.shape())}) : torch::cat(parts, 0);
  return out;
}

}  // namespace vispco::optimize
