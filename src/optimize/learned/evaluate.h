// Inference with a trained VisPCO predictor (Ji et al., ACL 2026, §3.5): for each test sample and budget b,
// g_φ → kernel parameters → keep fractions → integer K per layer → an ordinary pruning plan run through the
// physical-removal path (prune/plan_hook.h) by the evaluator (eval/evaluator.h, resumable result store; the
// samples that share a plan are evaluated together, under the plan's canonical text and the full dataset's
// hash, so results are shared with any other evaluation of that plan). Reports accuracy, FLOPs against the
// budget (with and without the budget projection), and the FLOPs ratio on the grid frontier's axis.
#pragma once
#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/metrics.h"
#include "model/vlm.h"
#include "optimize/learned/options.h"
#include "optimize/learned/predictor.h"
#include "prune/scorer.h"

namespace vispco::optimize::learned {

/// Settings of a budget evaluation (a plain value: defaults, validate(), equality over all fields).
struct BudgetEvalOptions {
  /// Budgets b to evaluate, each in (0, 1], at least one.
  std::vector<double> budgets = {0.1, 0.2, 0.3, 0.4, 0.5};
  /// Only the first `limit` samples of the dataset (0 = all).
  size_t limit = 0;
  /// Samples per generate() call within a plan group, ≥ 1.
  size_t batch = 8;
  /// SQLite result store ("" = none).
  std::string store_path;
  /// Project each sample's predicted keep fractions onto its budget before rounding
  /// (optimize/learned/budget_projection.h). The paper evaluates the predicted fractions as they are (false).
  bool project = true;
  /// Bound into every plan's scorers (the model folder), as every other evaluation binds them.
  ScorerEnv env;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const BudgetEvalOptions&) const = default;
};

/// One point of the VisPCO curve.
struct BudgetPoint {
  double budget = 0;            ///< b
  size_t n = 0;                 ///< samples evaluated
  eval::MetricSummary metrics;  ///< accuracy overall and per family
  double accuracy = 0;          ///< metrics.overall.accuracy()
  /// Σ (decoder + LM head at the last position) FLOPs with the predicted plans ÷ the same unpruned: the LLM
  /// prefill FLOPs ratio of the grid frontier's x-axis (optimize/plan_flops.h FlopsRatio::llm).
  double flops_ratio = 0;
  /// Achieved budget b̂ = (Σ A − Σ F_min) / (Σ F_max − Σ F_min), A the integer plans' decoder FLOPs.
  double achieved_budget = 0;
  /// Σ A / Σ T(b) − 1: relative error of the decoder FLOPs against the target (the acceptance's "within 2%").
  double flops_error = 0;
  /// Mean over samples of |A − T(b)| / T(b).
  double mean_abs_flops_error = 0;
  /// The same two errors of the predictor's own plans, before the budget projection (equal to the above when
  /// the projection is off).
  double raw_flops_error = 0;
  double raw_mean_abs_flops_error = 0;
  bool projected = false;         ///< the plans evaluated were projected onto the budget
  std::vector<double> mean_keep;  ///< [L] mean visual tokens entering each layer
  size_t n_plans = 0;             ///< distinct plans predicted
  std::string common_plan;        ///< the most frequent plan
  size_t common_plan_count = 0;
  double seconds = 0;  ///< prediction + evaluation wall time of this budget
  nlohmann::json to_json() const;
};

/// Evaluates the predictor at every budget on `dataset`.
/// @param model_hash eval::model_folder_hash of the model folder (store key).
/// @param progress called with one line per plan group and budget (may be empty).
/// @throws what evaluate() and image loading throw; InvalidArgument for bad options.
std::vector<BudgetPoint> evaluate_budgets(VisionLanguageModel& model, const std::string& model_hash,
                                          Predictor& predictor, const SearchOptions& search,
                                          const eval::Dataset& dataset, const BudgetEvalOptions& opts,
                                          const std::function<void(const std::string&)>& progress = {});

}  // namespace vispco::optimize::learned
