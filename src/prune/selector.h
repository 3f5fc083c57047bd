// Selectors: how K visual tokens are chosen from a scorer's per-token importance (STYLE.md: scorer split from
// selector). A plan stage names one with the option select=NAME ("fastv:layer=2,keep=64,select=dpp": FastV's
// attention scores, CDPruner's diversity); without it a scorer chooses as its paper does (Scorer::select).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "prune/scorer.h"

namespace vispco {

/// Chooses K of the N alive visual tokens of a stage. Stateless.
class Selector {
 public:
  virtual ~Selector() = default;
  /// Stage options this selector reads (besides select=).
  virtual std::vector<std::string> option_names() const { return {}; }
  /// Checks the stage's values of option_names(). @throws InvalidArgument naming the option and its range.
  virtual void check(const PruneStage& stage) const {}
  /// @param scores [B, N] fp32 importance of the alive tokens (Scorer::score; higher = more important)
  /// @param in the stage's input: in.state->hidden and in.visual_pos give the tokens (similarity),
  ///        in.stage->keep = K ∈ [1, N]
  /// @return keep [B, K] int64 indices into N (selection order), scores = `scores` (heat-maps).
  virtual Selection select(const at::Tensor& scores, const ScoreInput& in) const = 0;
};

/// One row of the selector registry.
struct SelectorEntry {
  std::string name;
  std::string description;  ///< the rule and its source, one line
  std::function<std::unique_ptr<Selector>()> make;
};

/// The registry table (name → factory): topk, mmr, dpp, merge, threshold (prune/soft_threshold.h).
const std::vector<SelectorEntry>& selector_registry();
/// @throws InvalidArgument "unknown selector 'x' (valid: topk, mmr, dpp, merge, threshold)".
std::unique_ptr<Selector> make_selector(const std::string& name);

// ---- Exposed for tests: the rules on plain tensors ----

/// Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998, §2) in one row: the first pick is the most
/// relevant token, then each pick maximises λ·r_i − (1 − λ)·max_{j chosen} sim(i, j). Ties: lowest index.
/// @param relevance [N] fp32 in [0, 1] @param similarity [N, N] fp32 @param k ∈ [1, N] @param lambda ∈ [0, 1]
/// @return k indices in selection order.
std::vector<int64_t> mmr_select(const at::Tensor& relevance, const at::Tensor& similarity, int64_t k,
                                double lambda);

/// Scores [N] min–max normalised per image into (0, 1] the way CDPruner's release normalises relevance:
/// (s − min + 1e−6) / max(max − min, 1e−12). @return [N] fp32 on the CPU.
at::Tensor relevance_from_scores(const at::Tensor& scores);

}  // namespace vispco
