// The scorer accuracy table (issue 6, docs/scorers.md): every pruning scorer at several kept-token counts K
// on one model and dataset, accuracy overall and per question family, retention against the unpruned model,
// prefill FLOPs of the plan and measured time to first token. Each (scorer, K) is one evaluation through the
// evaluator and its result store, so an interrupted table resumes and a repeated one costs nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "model/vlm.h"

namespace vispco::eval {
class WorkSharing;
}

namespace vispco::optimize {

/// What to tabulate (a plain value: defaults, validate()).
struct ScorerTableOptions {
  /// Kept visual tokens K per column, each in [1, N_v) (a K ≥ N_v prunes nothing and is rejected).
  std::vector<int64_t> keeps = {192, 128, 64, 32};
  /// Scorers (registry names, plus "pdrop"); empty = every registered scorer and pdrop, "gate" only when a
  /// gate file exists beside the model.
  std::vector<std::string> scorers;
  /// Layer ℓ of the single-stage in-LLM scorers (fastv, sparsevlm, dart); the ℓ = 0 ones prune before the
  /// LLM.
  int64_t llm_layer = 2;
  /// Evaluation settings shared by every cell (limit, batch, store, progress); `plan` and `out_dir` are set
  /// per cell (out_dir stays empty: only the store is written).
  vispco::eval::EvalOptions eval;

  /// @throws InvalidArgument naming the bad value.
  void validate() const;
};

/// One evaluated plan.
struct ScorerTableCell {
  std::string scorer;           ///< registry name, "pdrop", or "none" for the unpruned reference
  int64_t keep = 0;             ///< K asked (N_v for the reference)
  std::string plan;             ///< canonical plan text (store key without resources)
  double mean_kept = 0;         ///< visual tokens kept per sample, measured
  eval::MetricSummary metrics;  ///< overall and per family
  double flops_ratio =
      1;  ///< prefill FLOPs (vision + decoder + head) of the plan ÷ unpruned, at the mean N_t
  double mean_ttft_ms = 0;     ///< measured time to first token per batch (EvalReport::mean_ttft_ms)
  double mean_prepass_ms = 0;  ///< gradient pre-pass per sample (0 for other scorers)
  nlohmann::json to_json() const;
};

/// The whole table.
struct ScorerTable {
  std::string model_dir, model_hash, dataset, dataset_hash;
  size_t n_samples = 0;                ///< samples per cell
  size_t batch = 1;                    ///< samples per generate() call (TTFT is per batch)
  int64_t n_visual = 0;                ///< N_v of the model
  std::vector<int64_t> keeps;          ///< columns
  ScorerTableCell reference;           ///< unpruned
  std::vector<ScorerTableCell> cells;  ///< scorer-major, K in `keeps` order; cells that cannot run are absent
  std::vector<std::string> notes;      ///< why a scorer or cell is missing, how a plan was adapted
  nlohmann::json to_json() const;
  /// The Markdown document: provenance (`command`, model, dataset, date), optional `banner` (e.g. "random
  /// weights"), the accuracy/retention table, FLOPs and TTFT, one per-family table per K, the plan templates.
  std::string to_markdown(const std::string& command, const std::string& banner = "") const;
};

/// The plan a scorer is tabulated with at K, as text: ℓ = 0 scorers "S:layer=0,keep=K"; fastv, sparsevlm
/// and dart "S:layer=<llm_layer>,keep=K"; pool at the largest square ≤ K; pdrop three stages at layers ⌊L/4⌋,
/// ⌊L/2⌋, ⌊3L/4⌋ keeping N_v·(K/N_v)^(i/3) (ending at K). @throws InvalidArgument for an unknown scorer.
std::string scorer_table_plan(const std::string& scorer, int64_t keep, const ModelShape& shape,
                              int64_t llm_layer);

/// Evaluates the reference and every (scorer, K) cell. @param model_dir the folder `model` was loaded from
/// (store key, gate file) @param on_cell called after each cell (progress) @param sharing under a launcher:
/// every cell's evaluation shared by the ranks (eval/distributed/shared_eval.h; each rank returns the same
/// table, rank 0 writes the store); nullptr = this process alone.
/// @throws what evaluate() and PlanHook throw.
ScorerTable run_scorer_table(VisionLanguageModel& model, const std::string& model_dir,
                             const eval::Dataset& dataset, const ScorerTableOptions& options,
                             const std::function<void(const ScorerTableCell&)>& on_cell = {},
                             eval::WorkSharing* sharing = nullptr);

}  // namespace vispco::optimize
