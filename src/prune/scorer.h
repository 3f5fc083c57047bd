// The pruning-method interface (STYLE.md: scorer split from selector, one registry): a scorer sees the alive
// visual tokens of a stage and returns which K of them survive, optionally with merged tokens, and the
// per-token scores it ranked by (for heat-maps). Each method declares where it can hook. Methods that rank
// tokens also hand out their scores (score()), so a stage may choose with another rule instead
// (option select=NAME, prune/selector.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/shape.h"
#include "model/token_state.h"
#include "prune/plan.h"

namespace vispco {

/// What a scorer sees at one stage. N = alive visual tokens per row (equal across rows).
struct ScoreInput {
  const TokenState* state = nullptr;  ///< current tokens, [B, T, …]
  at::Tensor visual_pos;              ///< [B, N] int64: indices into T of the alive visual tokens, ascending
  at::Tensor attn_rows;               ///< [B, H, R, T] fp32: attention of the query rows the scorer asked for
                                      ///< (attention_queries(); by default R = 1, the last prompt token) at
                                      ///< layer ℓ−1 (in-LLM scorers that need it); undefined otherwise
  at::Tensor attn_weights;            ///< [B, R] fp32 weight of each row in a rater average (rows sum to 1;
                                      ///< 0 for padding rows), or undefined (then the rows weigh equally)
  at::Tensor keys;  ///< [B, H_kv, T, D_h] layer ℓ−1's keys after RoPE (needs().keys), or undefined
  const TokenState* input_state = nullptr;  ///< the tokens that entered decoder layer 0 (the LLM's input
                                            ///< embeddings), for in-LLM scorers; nullptr at ℓ = 0 stages
  at::Tensor saliency;       ///< [B, N_v] fp32 gradient saliency by patch (needs().saliency), or undefined
  at::Tensor cls_attention;  ///< [B, N_v] fp32 head-averaged [CLS] attention (ℓ = 0, when asked)
  at::Tensor vision_keys;    ///< [B, N_v, D_v] feature-layer keys (ℓ = 0, when asked)
  at::Tensor query_pos;      ///< [B] int64 index into T of each row's last prompt token, set where later
                             ///< columns are not prompt (a teacher-forced training forward); undefined at
                             ///< inference, where it is the last column
  int64_t grid = 0;          ///< patches per image side of a square grid (N_v = grid²); 0 when not square
  int64_t grid_rows = 0;     ///< rows × columns of the images' patch grid (VisualLayout)
  int64_t grid_cols = 0;
  int64_t layer = 0;                  ///< the stage's layer ℓ
  uint64_t seed = 0;                  ///< for stochastic scorers
  const PruneStage* stage = nullptr;  ///< the stage (keep, options)
};

/// Query rows whose attention a scorer needs from layer ℓ−1 (see Scorer::attention_queries).
struct AttentionQueries {
  at::Tensor rows;     ///< [B, R] int64 indices into T of the tokens entering layer ℓ−1
  at::Tensor weights;  ///< [B, R] fp32 weights (ScoreInput::attn_weights), or undefined for equal weights
};

/// What a scorer may need besides the model's tensors, bound once per stage (Scorer::bind).
struct ScorerEnv {
  std::string model_dir;  ///< the model folder ("" when unknown): the learned gate's default file lives there
  bool operator==(const ScorerEnv&) const = default;
};

/// A scorer's decision for K = stage.keep tokens: keep.size(1) + merged.size(1) == K.
struct Selection {
  at::Tensor scores;  ///< [B, N] fp32 importance of each alive token (higher = kept first); undefined if none
  at::Tensor keep;    ///< [B, K_keep] int64 indices into the N alive visual tokens (any order)
  at::Tensor merged;  ///< [B, M, D] new tokens made by merging (VisionZip contextual, pooling), or undefined
  at::Tensor
      merged_grid_index;  ///< [B, M] int64 representative patch index of each merged token (its position)
};

/// Where a method can act.
enum class HookPoint {
  kPreLlm,  ///< only ℓ = 0 (needs the full patch grid or the vision tower's signals)
  kInLlm,   ///< only ℓ ≥ 1 (needs decoder attention)
  kAny,
};

/// What a scorer reads besides the alive tokens' hidden states (Scorer::needs()). The baselines and DivPrune
/// read the tokens alone (only prompt_only is true).
struct ScorerNeeds {
  /// Layer ℓ−1's attention of the query rows attention_queries() names (ScoreInput::attn_rows; FastV-style).
  bool attention = false;
  /// The vision tower's [CLS] attention and feature-layer keys (ScoreInput::cls_attention, vision_keys;
  /// VisionZip).
  bool vision_attention = false;
  /// Layer ℓ−1's keys after RoPE (ScoreInput::keys; DART's pivots).
  bool keys = false;
  /// The gradient saliency of the visual tokens (ScoreInput::saliency), computed by generate()'s forward +
  /// backward pre-pass (model/saliency.h).
  bool saliency = false;
  /// score() reads nothing that depends on a token after the last prompt token (ScoreInput::query_pos), so
  /// it can score inside a teacher-forced training forward, whose later columns hold the answer (VisPCO's
  /// soft pruning, optimize/learned/soft_prune.h, which supplies attention rows and none of the other
  /// signals above). Declared by fastv, visionzip, gate and the token-only methods; not by SparseVLM (its
  /// raters are text tokens up to the end), CDPruner (its instruction), grad or DART.
  bool prompt_only = false;
};

/// A token-pruning method. Stateless apart from what bind() loads: one instance serves a stage for every
/// batch.
class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual HookPoint hook_point() const = 0;
  /// What score()/select() read besides the alive tokens (one declaration per method).
  virtual ScorerNeeds needs() const { return {}; }
  /// Whether this scorer can act on the images of a model of `shape` (default: every model). Searches and
  /// the scorer table leave the others out of their default scorer lists; a plan naming one is refused when
  /// it is bound.
  virtual bool applies_to(const ModelShape& shape) const { return true; }
  /// The query rows whose attention at layer ℓ−1 a needs().attention scorer reads. Called before layer ℓ−1
  /// with `in.state` = the tokens entering it, `in.visual_pos`, `in.input_state`, `in.stage`, `in.layer`
  /// (and in training `in.query_pos`) set. Default: the last prompt token, weight 1: `in.query_pos` when
  /// set, else the last column of every row (left padding at inference).
  virtual AttentionQueries attention_queries(const ScoreInput& in) const;
  /// Loads what the stage needs besides the model (the learned gate's weights). Called once per stage by
  /// PlanHook before any select(). @throws IoError/FormatError/InvalidArgument naming the file and a hint.
  virtual void bind(const PruneStage& stage, const ModelShape& shape, const ScorerEnv& env) {}
  /// Identifies what bind() loaded, for result-store keys ("" when nothing), e.g. "gate=sha256:<hex>".
  virtual std::string resource_key() const { return ""; }
  /// Option names this scorer accepts in a stage.
  virtual std::vector<std::string> option_names() const { return {}; }
  /// The options among option_names() that shape this method's own selection (VisionZip's contextual,
  /// SparseVLM's recycle, CDPruner's theta): refused in a stage whose select= replaces that selection.
  virtual std::vector<std::string> selection_option_names() const { return {}; }
  /// Whether score() gives a per-token importance a selector can use (stage option select=NAME). False for
  /// methods whose choice is not a ranking of per-token scores: DivPrune, DART, uniform, pool.
  virtual bool provides_scores() const { return false; }
  /// The per-token importance of the alive tokens: [B, N] fp32, higher = more important (the ranking select()
  /// uses; CDPruner: relevance to the instruction). @throws InvalidArgument when !provides_scores().
  virtual at::Tensor score(const ScoreInput& in) const;
  /// Stage checks beyond the plan's own (hook point, options, method-specific K limits, and a select=NAME
  /// option: a known selector, a scorer that provides scores, the selector's own options).
  /// @throws InvalidArgument naming the stage's problem.
  void check(const PruneStage& stage, const ModelShape& shape) const;
  /// Chooses stage->keep tokens by the method's own rule. Default: the top K of score() (FastV, grad,
  /// random).
  /// @throws InvalidArgument for inputs the method cannot use.
  virtual Selection select(const ScoreInput& in) const;

 protected:
  /// Checks of the method's own options (skipped when the stage's select= replaces its selection).
  virtual void check_extra(const PruneStage& stage, const ModelShape& shape) const {}
};

/// One row of the scorer registry.
struct ScorerEntry {
  std::string name;
  std::string description;  ///< paper and section, one line
  std::function<std::unique_ptr<Scorer>()> make;
  /// The layer ℓ a stage gets when its text names none: the method's paper setting (FastV §4, SparseVLM and
  /// DART: ℓ = 2; methods before the LLM and the baselines: 0).
  int64_t default_layer = 0;
};

/// The registry table (name → factory), in display order.
const std::vector<ScorerEntry>& scorer_registry();
/// @throws InvalidArgument listing the valid names.
std::unique_ptr<Scorer> make_scorer(const std::string& name);
/// ScorerEntry::default_layer of `name`. @throws InvalidArgument listing the valid names.
int64_t default_layer(const std::string& name);

/// Names of the scorers whose provides_scores() is true (the ones a stage's select= can use), in registry
/// order.
std::vector<std::string> scoring_scorers();

/// Top-K indices of scores [B, N] along the last dim, K = k. @return [B, k] int64.
at::Tensor top_k_indices(const at::Tensor& scores, int64_t k);

}  // namespace vispco
