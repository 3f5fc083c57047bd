// Factories of the built-in scorers, one file each under prune/scorers/; listed in prune/registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "prune/scorer.h"

namespace vispco {

std::unique_ptr<Scorer> make_fastv_scorer();
std::unique_ptr<Scorer> make_visionzip_scorer();
std::unique_ptr<Scorer> make_divprune_scorer();
std::unique_ptr<Scorer> make_random_scorer();
std::unique_ptr<Scorer> make_uniform_scorer();
std::unique_ptr<Scorer> make_base_view_scorer();
std::unique_ptr<Scorer> make_pool_scorer();
std::unique_ptr<Scorer> make_sparsevlm_scorer();
std::unique_ptr<Scorer> make_dart_scorer();
std::unique_ptr<Scorer> make_cdpruner_scorer();
std::unique_ptr<Scorer> make_gradient_scorer();
std::unique_ptr<Scorer> make_gate_scorer();

// ---- Helpers shared by the scorers (prune/scorers/common.cpp) ----

/// The instruction tokens of each row: valid text tokens after the image span (the question and the template
/// tail "ASSISTANT:"). @param s a TokenState [B, T, …] holding at least one visual token per row
/// @return [B, T] bool.
at::Tensor instruction_mask(const TokenState& s);

/// Rows of `x` [B, T, D] at `pos` [B, N] (int64 indices into T), as fp32 [B, N, D].
at::Tensor gather_rows(const at::Tensor& x, const at::Tensor& pos);

/// Reads option `name` of a stage as a number; `fallback` when absent.
/// @throws InvalidArgument "plan stage <scorer>: option <name> must be a number (got '…')".
double stage_option(const PruneStage& st, const std::string& name, double fallback);

/// stage_option() that must be an integer in [lo, hi]. @throws InvalidArgument naming the range.
int64_t stage_int_option(const PruneStage& st, const std::string& name, int64_t fallback, int64_t lo,
                         int64_t hi);

// ---- Exposed for tests: the core of each method on plain tensors ----

/// FastV's importance score (Chen et al., ECCV 2024, §4): the attention the first query row pays each visual
/// token, averaged over heads (the FastV scorer's score(), which VisPCO's training also ranks by).
/// @param attn_rows [B, H, R, T] floating (row 0 is read) @param visual_pos [B, N] int64 indices into T
/// @return [B, N] in attn_rows' dtype.
at::Tensor fastv_scores(const at::Tensor& attn_rows, const at::Tensor& visual_pos);

/// DART's selection in one row (Wen et al., EMNLP 2025, §4): pivots are the `n_image_pivots` visual tokens
/// and `n_text_pivots` instruction tokens of largest key L1 norm; the image pivots are kept; then for each
/// pivot in turn (image pivots by decreasing norm, then text pivots by decreasing norm) the not-yet-kept
/// visual tokens least cosine-similar to it in `*_hidden` are kept, the k − (kept image pivots) slots split
/// evenly over the pivots (the first ones take the remainder). With k ≤ n_image_pivots only the top-k image
/// pivots are kept.
/// @param visual_norms [N] fp32 key norms of the visual tokens @param text_norms [M] fp32 of the instruction
/// tokens @param visual_hidden [N, D] @param text_hidden [M, D] @return the k kept indices into N, pivots
/// first.
std::vector<int64_t> dart_select(const at::Tensor& visual_norms, const at::Tensor& text_norms,
                                 const at::Tensor& visual_hidden, const at::Tensor& text_hidden, int64_t k,
                                 int64_t n_image_pivots, int64_t n_text_pivots);

/// Greedy MAP inference of a DPP with kernel `kernel` [N, N] (symmetric PSD) by the incremental Cholesky
/// update of Chen, Zhang & Zhou, "Fast Greedy MAP Inference for Determinantal Point Process to Improve
/// Recommendation Diversity", NeurIPS 2018, Alg. 1: each step adds the item of largest marginal gain
/// d_i² = det(L_{S∪i}) / det(L_S), in O(N·k) per step. Once every remaining gain is ≤ 1e−10 (rank exhausted)
/// the rest are taken in order of their remaining gain (ties: lowest index), so exactly k items come back.
/// @return k indices in selection order.
std::vector<int64_t> dpp_greedy_map(const at::Tensor& kernel, int64_t k);

/// CDPruner's relevance/diversity trade-off θ (stage option theta, default 0), checked.
/// @throws InvalidArgument "plan stage <scorer>: theta must be in [0, 1) (got …)".
double cdpruner_theta(const PruneStage& st);

/// CDPruner's DPP quality q from relevance r [N] in (0, 1]: r itself (the release's kernel), or with option
/// theta=θ the trade-off of Chen et al. (NeurIPS 2018, §4), q = exp(θ·r / (2(1−θ))). @return [N] like r.
at::Tensor cdpruner_quality(const at::Tensor& relevance, const PruneStage& st);

/// SparseVLM's rater choice in one row (Zhang et al., ICML 2025, §3.2 "relevant text selection"): with the
/// visual embeddings V [N, D] and instruction embeddings Q [M, D] at the LLM input, R = softmax over the M
/// text tokens of V·Qᵀ (as the release: no 1/√D), r = R averaged over the N visual tokens; raters are the
/// text tokens with r_j > mean(r) (all of them when none is). @return ascending indices into M.
std::vector<int64_t> sparsevlm_raters(const at::Tensor& visual, const at::Tensor& text);

/// SparseVLM's recycling clusters (the release's density-peak clustering, DPC-kNN, Du et al. 2016): local
/// density ρ_i = exp(−mean of the squared distances to the min(5, n−1) nearest neighbours), δ_i = distance to
/// the nearest token of higher density (the largest distance for the densest), centres = the m tokens of
/// largest ρ·δ, every token joins its nearest centre; a recycled token is its cluster's mean. Distances are
/// Euclidean / √D. Ties break by lower index (the release adds random noise instead).
/// @param x [n, D] @return {merged [m, D] in x's dtype, centre indices [m] into n}.
std::pair<at::Tensor, std::vector<int64_t>> dpc_knn_merge(const at::Tensor& x, int64_t m);

/// DivPrune's greedy max–min selection (exposed for tests). @param dist [N, N] pairwise distances
/// @return the k chosen indices in selection order.
std::vector<int64_t> max_min_diverse_subset(const at::Tensor& dist, int64_t k);

/// VisionZip's contextual merge (exposed for tests): among `rest` [N_r, D] tokens with keys `keys` [N_r,
/// D_k], targets are every ⌊N_r/M⌋-th token (first M); each other token joins its most similar target (dot
/// product of L2-normalised keys); a contextual token is the mean of its target and its members.
/// @return {merged [M, D], target indices [M] into rest}.
std::pair<at::Tensor, at::Tensor> visionzip_merge(const at::Tensor& rest, const at::Tensor& keys, int64_t m);

/// The contextual half of a dominant + contextual split (VisionZip; the merge selector): per row, the alive
/// tokens not in `keep` merge into m tokens with visionzip_merge().
/// @param tokens [B, N, D] alive tokens @param keys [B, N, D_k] their similarity keys @param keep [B, K]
/// int64 indices into N kept as they are @param grid [B, N] int64 patch index of each alive token @param m ≥
/// 1, ≤ N − K. @return {merged [B, m, D], patch index of each merged token's target [B, m]}.
std::pair<at::Tensor, at::Tensor> merge_unkept(const at::Tensor& tokens, const at::Tensor& keys,
                                               const at::Tensor& keep, const at::Tensor& grid, int64_t m);

}  // namespace vispco
