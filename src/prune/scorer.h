// The pruning-method interface (STYLE.md: scorer split from selector, one registry): a scorer sees the alive
// visual tokens of a stage and returns which K of them survive, optionally with merged tokens, and the
// per-token scores it ranked by (for heat-maps). Each method declares where it can hook.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/token_state.h"
#include "prune/plan.h"

namespace vispco {

/// What a scorer sees at one stage. N = alive visual tokens per row (equal across rows).
struct ScoreInput {
  const TokenState* state = nullptr;  ///< current tokens, [B, T, …]
  at::Tensor visual_pos;              ///< [B, N] int64: indices into T of the alive visual tokens, ascending
  at::Tensor attn_rows;               ///< [B, H, 1, T] fp32: the last prompt token's attention at layer ℓ−1
                                      ///< (in-LLM scorers that need it); undefined otherwise
  at::Tensor cls_attention;           ///< [B, N_v] fp32 head-averaged [CLS] attention (ℓ = 0, when asked)
  at::Tensor vision_keys;             ///< [B, N_v, D_v] feature-layer keys (ℓ = 0, when asked)
  int64_t grid = 0;                   ///< patches per image side (N_v = grid²)
  int64_t layer = 0;                  ///< the stage's layer ℓ
  uint64_t seed = 0;                  ///< for stochastic scorers
  const PruneStage* stage = nullptr;  ///< the stage (keep, options)
};

/// A scorer's decision for K = stage.keep tokens: keep.size(1) + merged.size(1) == K.
struct Selection {
  at::Tensor scores;   ///< [B, N] fp32 importance of each alive token (higher = kept first); undefined if none
  at::Tensor keep;     ///< [B, K_keep] int64 indices into the N alive visual tokens (any order)
  at::Tensor merged;   ///< [B, M, D] new tokens made by merging (VisionZip contextual, pooling), or undefined
  at::Tensor merged_grid_index;  ///< [B, M] int64 representative patch index of each merged token (its position)
};

/// Where a method can act.
enum class HookPoint {
  kPreLlm,  ///< only ℓ = 0 (needs the full patch grid or the vision tower's signals)
  kInLlm,   ///< only ℓ ≥ 1 (needs decoder attention)
  kAny,
};

/// A token-pruning method. Stateless: one instance serves every stage and batch.
class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual HookPoint hook_point() const = 0;
  /// Needs the last prompt token's attention row at layer ℓ−1 (FastV-style).
  virtual bool needs_attention() const { return false; }
  /// Needs the vision tower's [CLS] attention and keys (VisionZip).
  virtual bool needs_vision_attention() const { return false; }
  /// Option names this scorer accepts in a stage.
  virtual std::vector<std::string> option_names() const { return {}; }
  /// Stage checks beyond the plan's own (hook point, options, method-specific K limits).
  /// @throws InvalidArgument naming the stage's problem.
  void check(const PruneStage& stage, const LlavaConfig& cfg) const;
  /// Chooses stage->keep tokens. @throws InvalidArgument for inputs the method cannot use.
  virtual Selection select(const ScoreInput& in) const = 0;

 protected:
  virtual void check_extra(const PruneStage& stage, const LlavaConfig& cfg) const {}
};

/// One row of the scorer registry.
struct ScorerEntry {
  std::string name;
  std::string description;  ///< paper and section, one line
  std::function<std::unique_ptr<Scorer>()> make;
};

/// The registry table (name → factory), in display order.
const std::vector<ScorerEntry>& scorer_registry();
/// @throws InvalidArgument listing the valid names.
std::unique_ptr<Scorer> make_scorer(const std::string& name);

/// Top-K indices of scores [B, N] along the last dim, K = k. @return [B, k] int64.
at::Tensor top_k_indices(const at::Tensor& scores, int64_t k);

}  // namespace vispco
