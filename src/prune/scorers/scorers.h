// Factories of the built-in scorers, one file each under prune/scorers/; listed in prune/registry.cpp.
#pragma once
#include <memory>

#include "prune/scorer.h"

namespace vispco {

std::unique_ptr<Scorer> make_fastv_scorer();
std::unique_ptr<Scorer> make_visionzip_scorer();
std::unique_ptr<Scorer> make_divprune_scorer();
std::unique_ptr<Scorer> make_random_scorer();
std::unique_ptr<Scorer> make_uniform_scorer();
std::unique_ptr<Scorer> make_pool_scorer();

/// DivPrune's greedy max–min selection (exposed for tests). @param dist [N, N] pairwise distances
/// @return the k chosen indices in selection order.
std::vector<int64_t> max_min_diverse_subset(const at::Tensor& dist, int64_t k);

/// VisionZip's contextual merge (exposed for tests): among `rest` [N_r, D] tokens with keys `keys` [N_r, D_k],
/// targets are every ⌊N_r/M⌋-th token (first M); each other token joins its most similar target (dot product of
/// L2-normalised keys); a contextual token is the mean of its target and its members.
/// @return {merged [M, D], target indices [M] into rest}.
std::pair<at::Tensor, at::Tensor> visionzip_merge(const at::Tensor& rest, const at::Tensor& keys, int64_t m);

}  // namespace vispco
