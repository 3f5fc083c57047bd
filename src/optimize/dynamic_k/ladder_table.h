// Dynamic K (issue 18; seed §5: "learn different K for images of different complexity"): what each sample
// gets right at each rung of a ladder of K values under one plan template, the per-sample label (the smallest
// rung from which on the answer stays right) and the figures of any per-sample rung assignment (accuracy,
// LLM FLOPs ratio). Pure: the table is filled by the caller (dynamic_k.cpp from the result store).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::optimize {

/// Which per-sample outcome a label asks to keep.
enum class KTarget {
  kCorrect,  ///< the pruned greedy answer is still correct (scored like `vispco eval`)
  kAgree,    ///< the pruned greedy answer equals the unpruned one (normalised text)
};
/// "correct" | "agree".
const char* k_target_name(KTarget t);
/// @throws InvalidArgument listing the valid names.
KTarget k_target_from_name(const std::string& name);

/// Outcomes of n samples at R rungs. Rung R−1 is the unpruned model (K = N_v).
struct LadderTable {
  std::vector<int64_t> ladder;                 ///< [R] ascending K; ladder.back() == N_v
  std::vector<std::string> ids, families;      ///< [n]
  std::vector<std::vector<double>> score;      ///< [n][R] headline score in [0, 1] (eval/metrics.h)
  std::vector<std::vector<uint8_t>> agree;     ///< [n][R] 1 when the answer equals the unpruned one
  std::vector<std::vector<double>> llm_flops;  ///< [n][R] LLM prefill FLOPs of the sample at the rung

  size_t n() const { return ids.size(); }
  size_t rungs() const { return ladder.size(); }
  /// Checks sizes and the ladder (ascending, ≥ 2 rungs). @throws InvalidArgument.
  void validate() const;
};

/// The label of sample i: the smallest rung r such that the target holds at every rung r' ≥ r ("stays right
/// from r on": a predictor can only choose where to start, so a lucky hit below a miss does not count).
/// kCorrect: −1 when the unpruned answer is wrong (no K makes it right; such samples carry no label).
/// kAgree: always defined (the unpruned rung agrees with itself).
std::vector<int> ladder_labels(const LadderTable& t, KTarget target);

/// Figures of a per-sample rung assignment.
struct AssignmentFigures {
  double accuracy = 0;     ///< mean score at the assigned rungs, in [0, 1]
  double flops_ratio = 1;  ///< Σ LLM FLOPs at the assigned rungs ÷ Σ unpruned LLM FLOPs
  double mean_keep = 0;    ///< mean K
  /// The same per family.
  struct Family {
    size_t n = 0;
    double accuracy = 0, flops_ratio = 1, mean_keep = 0, unpruned_accuracy = 0;
  };
  std::map<std::string, Family> per_family;
};
/// @param rungs [n] rung index per sample in [0, R). @throws InvalidArgument for a size or index mismatch.
AssignmentFigures assignment_figures(const LadderTable& t, const std::vector<int>& rungs);
/// Every sample at rung r (a static plan).
std::vector<int> constant_rungs(const LadderTable& t, int r);
nlohmann::json to_json(const AssignmentFigures& f);

}  // namespace vispco::optimize
