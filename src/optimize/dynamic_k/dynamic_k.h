// `vispco optimize --method dynamic-k` (issue 18): per-image K from a light predictor. For one plan template
// and a K ladder it (1) evaluates every rung on a training split, a validation split and the test split
// (result store: resumable, shared with static plans), (2) labels each training sample with the smallest rung
// from which its answer stays right (ladder_table.h), (3) trains the ordinal MLP (k_predictor.h) on cheap
// features (k_features.h), (4) chooses the safety threshold τ on validation so that the accuracy loss stays
// within ε at the fewest FLOPs, and (5) reports on test: dynamic K against every static rung at equal mean
// LLM FLOPs and against the oracle that knows each sample's label, per family; then runs the keep=auto plan
// end to end (auto_keep_eval.h) as a check of the table's figures.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "model/vlm.h"
#include "optimize/dynamic_k/k_predictor.h"
#include "optimize/dynamic_k/ladder_table.h"

namespace vispco::eval {
class WorkSharing;
}

namespace vispco::optimize {

/// Settings of a dynamic-K search (a plain value).
struct DynamicKOptions {
  /// One-stage K template, e.g. "divprune:layer=0" (no keep=).
  std::string template_text;
  /// Rungs, ascending; the full rung is appended when missing (it runs unpruned). Counts K in [1, N_v], or,
  /// with `permille`, keep ratios in ‰ of each image's own N_v in [1, 1000].
  std::vector<int64_t> ladder = {16, 24, 32, 48, 64, 96, 144, 192, 288, 576};
  /// The ladder is keep ratios in ‰ (models whose images make their own N_v: `--keep-as auto|ratio`); the
  /// predictor file says so (KPredictorMeta::ladder_unit) and keep=auto then keeps a share of each image.
  bool permille = false;
  /// Accuracy loss allowed on validation: relative (default) or absolute (accuracy fraction).
  double epsilon = 0.01;
  bool epsilon_absolute = false;
  /// Label target: "correct" or "agree" (ladder_table.h).
  std::string target = "correct";
  int64_t hidden = 64;                                    ///< predictor hidden width, ≥ 1
  KPredictorTraining training;                            ///< predictor training
  size_t limit_train = 0, limit_val = 0, limit_test = 0;  ///< first samples of each split (0 = all)
  size_t batch_size = 8;                                  ///< samples per generate() call
  std::string store_path;                                 ///< result store (required)
  /// τ is accepted only when the upper confidence bound on the validation loss is within ε (0 = point
  /// estimate; else in [0.5, 1)); confidence.h.
  double confidence = 0.0;
  /// The ε-coverage experiment (epsilon_coverage.h) on the training split as pool and the test split:
  /// draws of calibration subsets of coverage_n_calib samples at confidence max(confidence, 0.9). 0 draws =
  /// off.
  size_t coverage_draws = 500, coverage_n_calib = 64;
  /// @throws InvalidArgument naming the bad value.
  void validate() const;
};

/// One (mean LLM FLOPs ratio, accuracy) point of the test split.
struct DynamicKPoint {
  std::string name;  ///< "static K=64", "dynamic", "oracle", …
  AssignmentFigures figures;
};

/// Everything the search measured.
struct DynamicKReport {
  DynamicKOptions options;
  nlohmann::json inputs = nlohmann::json::object();
  std::vector<int64_t> ladder;               ///< as used (N_v last)
  int64_t n_parameters = 0;                  ///< predictor weights
  KTrainingResult training;                  ///< losses; early-stopping step on the held-out fifth
  size_t n_train = 0, n_train_labelled = 0;  ///< training-split samples, those with a label
  size_t n_holdout = 0;                      ///< of them held out for early stopping (every fifth)
  std::vector<size_t> label_histogram;       ///< [R] training labels per rung
  /// Validation sweep of τ: (τ, accuracy, FLOPs ratio), and the chosen τ and why.
  std::vector<std::array<double, 3>> tau_sweep;
  double tau = 0.5;
  bool tau_met_epsilon = true;  ///< false: no τ of the sweep held ε on validation; τ = 1e-6 (≈ every token)
  double val_unpruned_accuracy = 0;
  AssignmentFigures val_dynamic;
  /// Test: every static rung, the static rung chosen on validation (smallest K within ε there), dynamic,
  /// oracle.
  std::vector<DynamicKPoint> test_static;
  int static_chosen_rung = -1;
  AssignmentFigures test_dynamic, test_oracle;
  /// Static accuracy at the dynamic plan's mean FLOPs (linear between rungs) and the static FLOPs ratio that
  /// reaches the dynamic accuracy (upper envelope of the static curve); NaN when outside the curve.
  double static_accuracy_at_dynamic_flops = 0, static_flops_at_dynamic_accuracy = 0;
  /// Validation loss bound at the chosen τ (when options.confidence > 0).
  nlohmann::json val_loss_bound = nullptr;
  /// Static min-K on the ladder from re-drawn calibration subsets: how often ε fails on test
  /// (epsilon_coverage.h).
  nlohmann::json coverage = nullptr;
  /// The keep=auto plan run end to end on test (auto_keep_eval.h): accuracy, mean K, batching.
  nlohmann::json end_to_end = nlohmann::json::object();
  /// Cost of K prediction per sample (features + MLP) against the unpruned prefill, ms.
  double predict_ms_per_sample = 0, unpruned_prefill_ms_per_sample = 0;
  std::string predictor_path;
  std::vector<std::string> plots;
  double wall_s = 0;
  nlohmann::json to_json() const;
  std::string to_markdown() const;
  std::string summary() const;
};

/// Runs the search; writes the predictor to `out_dir`/k_predictor.safetensors and the report
/// (`out_dir`/dynamic_k.json, dynamic_k.md, plots unless no_plots). @param model_dir for the gate scorer
/// @param sharing under a launcher (issue 50): the three ladder tables — the labels' evaluations, nearly all
///        of the work — are shared sweeps (ladder_eval.h), equal to a single process's; then rank 0 alone
///        computes the features, trains the predictor, chooses τ, runs the keep=auto plan end to end (in one
///        process: keep=auto is not shared) and writes the files, so its report equals a single process's
///        (timings aside). Every other rank returns after the tables: a report with only options and ladder
///        set, nothing written. nullptr (or world size 1): one process.
/// @throws InvalidArgument (options), what evaluation throws, IoError (files, gnuplot).
DynamicKReport run_dynamic_k(VisionLanguageModel& model, const std::string& model_dir,
                             const std::string& model_hash, const eval::Dataset& train,
                             const eval::Dataset& val, const eval::Dataset& test,
                             const DynamicKOptions& options, const std::string& out_dir, bool no_plots,
                             const std::function<void(const std::string&)>& log,
                             eval::WorkSharing* sharing = nullptr);

}  // namespace vispco::optimize
