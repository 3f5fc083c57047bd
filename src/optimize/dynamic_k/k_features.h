// K-predictor features of dataset samples (issue 18), for training and searching: the images read, the vision
// tower run in batches, and the per-sample features of prune/auto_keep/k_features.h, with their cost.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "eval/dataset.h"
#include "model/vlm.h"
#include "prune/auto_keep/k_features.h"

namespace vispco::optimize {

/// Features of dataset samples, with the time they took.
struct DatasetFeatures {
  at::Tensor features;    ///< [n, F] fp32, in the order of `indices`
  double tower_ms = 0;    ///< images read + vision tower + projector (inference runs these anyway)
  double feature_ms = 0;  ///< the features themselves (pooling, question embedding): the predictor's own cost
};
/// @param indices into ds.samples @param batch images per tower call, ≥ 1. @throws IoError (unreadable
/// image).
DatasetFeatures dataset_k_features(VisionLanguageModel& m, const eval::Dataset& ds,
                                   const std::vector<size_t>& indices, size_t batch);

}  // namespace vispco::optimize
