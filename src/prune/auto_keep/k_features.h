// Inputs of the K predictor (issue 18): features that are cheap once the vision tower has run — the mean of
// the projected visual tokens (how busy the image is in the LLM's space), the mean input embedding of the
// question's tokens (what is asked: "how many" needs more tokens than "is there"), and two statistics of the
// tower's [CLS] attention at the feature layer (its entropy over N_v, normalised by log N_v, and the mass on
// its top 10 % of tokens: VisionZip's dominant-token concentration, Yang et al. CVPR 2025 §3.2). A dataset's
// features for training are optimize/dynamic_k/k_features.h.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "model/shape.h"
#include "model/vlm.h"

namespace vispco {

/// Name of the feature recipe, recorded in predictor files (a file for another recipe is refused).
inline constexpr const char* kKFeatureRecipe = "visual-mean+question-mean+cls-entropy+cls-top10-v1";

/// F = 2·D + 2 for a decoder of width D.
int64_t k_feature_width(const ModelShape& shape);

/// Features of a batch whose visual tokens are computed. @param vt from encode_image_list(pixels, true) (the
/// [CLS] attention is required; a ragged batch is taken row by row, each over its own N_v) @param questions
/// [B] question texts (without the prompt template)
/// @return [B, F] fp32. @throws InvalidArgument when the [CLS] attention is missing or sizes differ.
at::Tensor k_features(VisionLanguageModel& m, const VisualTokens& vt,
                      const std::vector<std::string>& questions);

}  // namespace vispco
