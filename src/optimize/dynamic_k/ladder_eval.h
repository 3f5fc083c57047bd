// Filling a ladder table (ladder_table.h) from real evaluations: every rung of a K ladder under one plan
// template on the first samples of a dataset, through the result store (so a repeated or killed run resumes,
// and the static plans' results are shared with `vispco eval` and the other searches).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "model/vlm.h"
#include "optimize/dynamic_k/ladder_table.h"
#include "prune/auto_keep/auto_keep.h"
#include "prune/scorer.h"

namespace vispco::eval {
class WorkSharing;
}

namespace vispco::optimize {

/// A filled table and the unpruned rung's mean measured prefill.
struct LadderEval {
  LadderTable table;
  double unpruned_prefill_ms = 0;  ///< mean decoder prefill per sample at K = N_v, ms
};

/// The rungs and plan of a ladder experiment (dynamic-k, coverage).
struct LadderPlan {
  std::vector<int64_t> ladder;  ///< ascending keep values, the full one (N_v, or 1000 ‰) last
  AutoKeepPlan plan;            ///< the template as a keep=auto plan (plan.permille: a keep-ratio ladder)
};

/// `ladder` with the full rung appended when missing — N_v for counts, 1000 for keep ratios in ‰ of each
/// image's own N_v (`permille`) — and `template_text` (a one-stage template without keep) parsed as a
/// keep=auto plan for `shape`. @param who the start of error messages, e.g. "dynamic-k"
/// @throws InvalidArgument for a ladder value above the full one, a ladder with no rung below it, or a
/// template that does not fit the model.
LadderPlan ladder_plan(const std::vector<int64_t>& ladder, const std::string& template_text,
                       const ModelShape& shape, const std::string& who, bool permille = false);

/// Evaluates `plan` at every keep value of `ladder` (the last rung must be the full one, plan.full(): it runs
/// unpruned, plan "none"; keep ratios resolve per image) on the
/// first `limit` samples (0 = all) in batches of `batch`, greedy as `vispco eval`. Per-sample LLM FLOPs come
/// from the analytic model at each sample's own prompt length and, where N_v varies by image
/// (n_visual_varies), at its image's own N_v. @param log one line per rung (may be empty)
/// @param sharing under a launcher: every rung's evaluation is a shared sweep
/// (eval/distributed/shared_eval.h:
///        the samples handed out as work items by rank 0, which alone writes `store_path`); every rank
///        returns the same table, equal to a single process's. nullptr (or world size 1): evaluated here.
/// @throws InvalidArgument (empty split, a ladder not ending at N_v), what eval::evaluate throws; under a
///         launcher what eval::evaluate_shared throws (ranks that disagree, rank 0 gone).
LadderEval evaluate_ladder(VisionLanguageModel& m, const std::string& model_hash, const eval::Dataset& ds,
                           size_t limit, const AutoKeepPlan& plan, const std::vector<int64_t>& ladder,
                           size_t batch, const std::string& store_path, const ScorerEnv& env,
                           const std::function<void(const std::string&)>& log = {},
                           eval::WorkSharing* sharing = nullptr);

}  // namespace vispco::optimize
