// The plan front door (issue 44): a plan text is parsed once against a model's ModelShape and the model
// folder (ScorerEnv) into a BoundPlan — its canonical text, its result-store key, its scorers bound to their
// resources (a learned gate's file read and hashed once) and, for keep=auto, its K predictor loaded once
// (prune/auto_keep/). generate, eval, the searches, finetune, bench and serve all take plans through here.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/shape.h"
#include "model/vlm.h"
#include "prune/auto_keep/auto_keep.h"
#include "prune/plan.h"
#include "prune/scorer.h"

namespace vispco {

class PlanHook;

/// A pruning plan parsed and bound once. A cheap-to-copy handle over immutable state: copies share the bound
/// scorers and the predictor, so one BoundPlan may serve many threads (hook() makes a fresh PlanHook per
/// generate() call; predict_keep() only reads the predictor).
class BoundPlan {
 public:
  /// The unpruned plan: text and key "none".
  BoundPlan();

  /// The front door. `text` is the compact syntax (prune/plan.h), a .json plan file, keep=auto
  /// (prune/auto_keep/auto_keep.h), or "none" / "NONE" / "" (surrounding blanks ignored) for the unpruned
  /// plan. A stage without layer= gets its scorer's registry default (ScorerEntry::default_layer). keep=auto
  /// loads the predictor (file= or `<env.model_dir>/k_predictor.safetensors`) and binds the static plan at
  /// every rung of its ladder below N_v.
  /// @throws InvalidArgument (syntax, a plan the model cannot run), IoError / FormatError (a .json plan file,
  ///         a gate or predictor file missing or malformed), ConfigError (a predictor trained for another
  ///         template or model, a gate for another width).
  static BoundPlan bind(const std::string& text, const ModelShape& shape, const ScorerEnv& env);
  /// Binds a plan already held as a value (searches that build plans; the static plan at K).
  /// @throws as bind(text) for a static plan.
  static BoundPlan bind(const PruningPlan& plan, const ModelShape& shape, const ScorerEnv& env);

  /// True for the empty static plan (no pruning).
  bool unpruned() const;
  /// True for a keep=auto plan (then plan() is empty and at_keep() gives the plan each sample runs).
  bool is_auto() const;
  /// Whether the kept tokens depend on the image alone (what a cached image KV prefix needs,
  /// serve/image_cache.h): true for the unpruned plan, or a static plan whose every stage acts at ℓ = 0
  /// with a scorer that declares so as bound (prune/question_independent.h; the learned gate from the
  /// use_question of the file it loaded, nothing read again; a select= selector reads the scores and tokens
  /// only). False for keep=auto (K is decided per request from the question).
  bool question_independent() const;
  /// The static plan; empty when unpruned or keep=auto.
  const PruningPlan& plan() const;
  /// Canonical text: "none", PruningPlan::to_string(), or AutoKeepPlan::to_string() for keep=auto.
  const std::string& text() const;
  /// The result-store key: the canonical text, then " @" and each stage's scorer resource key (e.g.
  /// "gate:layer=0,keep=64 @gate=sha256:…"); "none" when unpruned; the canonical text for keep=auto (its
  /// samples are stored under the static plans at their K).
  const std::string& key() const;
  /// The model shape it was bound against.
  const ModelShape& shape() const;
  /// Where its scorers found their resources.
  const ScorerEnv& env() const;

  /// A fresh hook over the bound scorers (nothing is read again), seeded for stochastic scorers; nullptr when
  /// unpruned. @throws InvalidArgument for keep=auto (take at_keep() first).
  std::unique_ptr<PlanHook> hook(uint64_t seed = 0) const;

  /// keep=auto: the parsed template. @throws InvalidArgument when !is_auto().
  const AutoKeepPlan& auto_keep() const;
  /// keep=auto: the predictor's settings (ladder, template, τ). @throws InvalidArgument when !is_auto().
  const KPredictorMeta& predictor_meta() const;
  /// keep=auto: K per row, a rung of the ladder. @param features [n, F] fp32 (k_features())
  /// @return [n] K values. @throws InvalidArgument when !is_auto(), c10::Error for a feature width ≠ F.
  std::vector<int64_t> predict_keep(const at::Tensor& features) const;
  /// keep=auto: K per image from its visual tokens and question. @param vt from encode_images(pixels, true)
  /// ([CLS] attention required) @param questions [B] question texts. @return [B] K values.
  /// @throws InvalidArgument (not keep=auto, no [CLS] attention, one question per image expected).
  std::vector<int64_t> predict_keep(VisionLanguageModel& model, const VisualTokens& vt,
                                    const std::vector<std::string>& questions) const;
  /// keep=auto: the bound static plan at K — unpruned when K ≥ N_v; a ladder rung was bound by bind(), any
  /// other K is bound now. @throws InvalidArgument when !is_auto() or the plan at K does not fit the model.
  BoundPlan at_keep(int64_t keep) const;

 private:
  struct State;
  explicit BoundPlan(std::shared_ptr<const State> state);
  const State& auto_state(const char* what) const;
  std::shared_ptr<const State> s_;
};

/// The canonical text BoundPlan::bind(text, shape, …).text() gives, from parsing alone (no scorer bound, no
/// gate or predictor read; a .json plan file is read): a cache key for callers that bind a plan once per
/// canonical text (the server). @throws InvalidArgument for a syntax error or a keep=auto template that does
/// not fit; IoError / FormatError for a bad .json file.
std::string canonical_plan_text(const std::string& text, const ModelShape& shape);

/// Whether a plan text means the unpruned plan: "", "none" in any case, surrounding blanks ignored.
bool is_unpruned_text(const std::string& text);

}  // namespace vispco
