// The steps of evaluate() (eval/evaluator.h) as functions, so that the distributed sweep
// (eval/distributed/shared_eval.h) runs the very same sample selection, batching, scoring and report
// assembly as the single-process loop: equal predictions and reports by construction. Internal to eval/.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eval/evaluator.h"

namespace vispco::eval::detail {

/// Sample indices (into dataset.samples) after limit and shard, in dataset order.
std::vector<size_t> select_samples(const Dataset& ds, const EvalOptions& o);

/// The store key of the evaluation. @throws InvalidArgument when hook and plan disagree (one is "none").
RunKey eval_run_key(const VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                    const EvalOptions& options, const PrefillHook* hook);

/// Generates samples in batches of options.batch_size (images loaded, shuffled under shuffle_images).
class SampleRunner {
 public:
  SampleRunner(VisionLanguageModel& model, const Dataset& dataset, const EvalOptions& options,
               PrefillHook* hook);
  /// The sample whose image sample i is shown (itself unless shuffled).
  const Sample& shown(size_t i) const;
  /// Generates `indices` (in that order, batched), appending to `results`; an unreadable image under kSkip
  /// appends (id, warning) to `skipped`. `after_batch(batch results, samples tried)` runs after each batch.
  /// @throws IoError/FormatError for an unreadable image under kStop, what generate() throws.
  void run(const std::vector<size_t>& indices, std::vector<SampleResult>& results,
           std::vector<std::pair<std::string, std::string>>& skipped,
           const std::function<void(const std::vector<SampleResult>&, size_t)>& after_batch = {});

 private:
  VisionLanguageModel& model_;
  const Dataset& dataset_;
  const EvalOptions& options_;
  PrefillHook* hook_;
  std::vector<size_t> image_source_;
};

/// Rows of every selected sample (fresh results first, else stored ones; skipped samples left out), scored,
/// then summarise_rows().
void assemble_report(EvalReport& rep, const Dataset& dataset, const EvalOptions& options,
                     const SampleRunner& runner, const std::vector<size_t>& selected,
                     const std::map<std::string, SampleResult>& fresh,
                     const std::map<std::string, SampleResult>& stored);

/// rep.n_skipped (distinct ids) and rep.warnings (at most 20, then a count) from (id, warning) pairs.
void add_skip_warnings(EvalReport& rep, const std::vector<std::pair<std::string, std::string>>& skipped);

/// Opens the result store at `path`, creating its folder. @throws IoError.
std::unique_ptr<ResultStore> open_store(const std::string& path);

}  // namespace vispco::eval::detail
