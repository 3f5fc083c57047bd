// Data-dependent initialisation of the LLaVA projector before the decoder stages.
//
// Why: the frozen tower's feature-layer activations share a large common component (on the bundled model's
// tower, the mean feature vector carries ~98% of each token's norm and tokens have mean pairwise cosine
// 0.93), so a randomly initialised projector maps all 576 patches to nearly the same embedding (cosine 0.996)
// and the decoder, after its RMSNorm, sees almost no difference between visual tokens: training stalls on the
// answer priors. Standardising the projector's input per feature dimension (mean 0, variance 1 over a sample
// of training images) removes the common component without changing the architecture: it is folded into
// linear_1's weight and bias, so the checkpoint is a plain LLaVA projector. Same idea as data-dependent
// initialisation (Krähenbühl et al., ICLR 2016; Mishkin & Matas, "All you need is a good init", ICLR 2016).
#pragma once
#include <ATen/core/Tensor.h>

#include "model/llava/llava.h"

namespace vispco::train {

/// Folds per-dimension standardisation of `features` into `projector.linear_1`:
/// W ← W·diag(1/σ), b ← b − W·diag(1/σ)·μ, with μ, σ the mean and standard deviation of each feature
/// dimension over all tokens of `features` (σ floored at 1e-6), so that linear_1(x) of the new projector
/// equals linear_1((x − μ)/σ) of the old one.
/// @param features [B, N_v, D_v] tower features (fp32) of training images, B·N_v ≥ 2.
/// @throws InvalidArgument when the shapes do not match linear_1's input width or fewer than 2 tokens.
void standardise_projector_input(LlavaProjector& projector, const at::Tensor& features);

}  // namespace vispco::train
