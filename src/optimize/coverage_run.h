// The ε-coverage experiment on real evaluations (issue 46, `vispco optimize --method coverage`): a K ladder
// of one plan template evaluated on a pool of labelled samples and on a test split (dynamic_k/ladder_eval.h,
// through the result store), then epsilon_coverage() over re-drawn calibration subsets of the main job's
// size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "model/vlm.h"
#include "optimize/epsilon_coverage.h"
#include "prune/scorer.h"

namespace vispco::eval {
class WorkSharing;
}

namespace vispco::optimize {

/// Settings of run_coverage() (a plain value).
struct CoverageRunOptions {
  std::string template_text;              ///< one-stage K template, e.g. "divprune:layer=0"
  std::vector<int64_t> ladder;            ///< ascending K; N_v is appended when missing (the unpruned rung)
  size_t limit_pool = 0, limit_test = 0;  ///< first samples of each split (0 = all)
  size_t batch_size = 8;
  std::string store_path;  ///< result store, required
  CoverageOptions coverage;
  /// @throws InvalidArgument naming the bad value.
  void validate() const;
};

/// The experiment's report.
struct CoverageRunReport {
  CoverageRunOptions options;
  std::vector<int64_t> ladder;  ///< as evaluated (N_v last)
  size_t n_pool = 0, n_test = 0;
  CoverageResult result;
  double wall_s = 0;
  nlohmann::json inputs = nlohmann::json::object();  ///< paths and hashes (the caller's)
  nlohmann::json to_json() const;
  std::string to_markdown() const;
  std::string summary() const;
};

/// Evaluates the ladder on `pool` and `test` (greedy, as `vispco eval`; results shared through the store),
/// then runs epsilon_coverage(). @param log one line per rung (may be empty)
/// @param sharing under a launcher (issue 50): each rung of both ladders is a shared sweep
///        (dynamic_k/ladder_eval.h); every rank then computes the same report (the draws are cheap and
///        seeded), equal to a single process's; the caller lets rank 0 alone write it. nullptr: one process.
/// @throws InvalidArgument (bad options, a ladder value above N_v), what the evaluations throw.
CoverageRunReport run_coverage(VisionLanguageModel& model, const std::string& model_dir,
                               const std::string& model_hash, const eval::Dataset& pool,
                               const eval::Dataset& test, const CoverageRunOptions& options,
                               const std::function<void(const std::string&)>& log = {},
                               eval::WorkSharing* sharing = nullptr);

}  // namespace vispco::optimize
