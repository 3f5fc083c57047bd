// The plans `vispco serve --frontier` may choose from: the evaluated calibration points of a `vispco
// optimize` report (optimize.json, docs/optimize.md), each with its FLOPs ratio and its accuracy loss against
// the unpruned point (the stored upper confidence bound where the run had --confidence). A request's target
// (max_accuracy_loss, max_flops_ratio) picks the cheapest plan that meets it (issue 49).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vispco::serve {

/// One evaluated plan of the report.
struct FrontierPlan {
  std::string plan;        ///< canonical plan text as the report stores it ("none" = unpruned)
  double flops_ratio = 1;  ///< LLM prefill FLOPs ÷ unpruned over the calibration prompts, in (0, 1]
  double accuracy = 0;     ///< calibration accuracy, in [0, 1]
  double loss = 0;         ///< unpruned accuracy − this accuracy (point estimate, accuracy fraction)
  /// Upper confidence bound on the loss at `confidence` (the report's loss_bound.upper), when stored.
  std::optional<double> loss_upper;
  double confidence = 0;  ///< the bound's level (0 without a bound)
  /// The loss targets are judged by: the bound where stored, else the point estimate.
  double judged_loss() const { return loss_upper ? *loss_upper : loss; }
  /// {"plan", "flops_ratio", "accuracy_loss", "accuracy_loss_bound", "confidence"} for a reply's vispco
  /// block.
  nlohmann::json promise_json() const;
};

/// A request's (or the server's default) target; either field may be absent, both may be given.
struct Target {
  std::optional<double> max_accuracy_loss;  ///< judged loss ≤ this, accuracy fraction in [0, 1]
  std::optional<double> max_flops_ratio;    ///< FLOPs ratio ≤ this, in (0, 1]
  bool empty() const { return !max_accuracy_loss && !max_flops_ratio; }
  /// "max_accuracy_loss 0.02 and max_flops_ratio 0.3".
  std::string text() const;
  nlohmann::json to_json() const;
  /// @throws InvalidArgument naming the field when a value is outside its range or not finite.
  void validate() const;
};

/// The plans of one report, cheapest first.
class Frontier {
 public:
  /// Reads an optimize.json. @param path the file @throws ConfigError (one line naming the file and what is
  /// wrong) for a missing or unreadable file, malformed JSON, or a report without calibration points, without
  /// the unpruned point, or with a point missing plan / accuracy / flops_ratio.
  static Frontier load(const std::string& path);
  /// The same from parsed JSON; `source` names it in messages. @throws ConfigError as load().
  static Frontier from_json(const nlohmann::json& report, const std::string& source);

  /// @throws ConfigError when the report was written for another model: its inputs.model_hash differs from
  /// `model_hash` (eval::model_folder_hash of the served folder). A report without a hash is accepted.
  void check_model(const std::string& model_hash, const std::string& model_dir) const;
  /// The plan for `t`, or null when none meets it. With a loss target (alone or with a FLOPs cap): the
  /// cheapest plan (lowest FLOPs ratio; lower judged loss among equal ratios) meeting it. With a FLOPs cap
  /// alone: the most accurate plan (lowest judged loss, the cheaper among equals) within it — the cheapest
  /// plan of all would always meet a cap, which is not what a cap asks for.
  const FrontierPlan* pick(const Target& t) const;
  /// The plan to name when nothing meets `t`: the lowest judged loss among the plans within the FLOPs target
  /// (or among all when none is), the cheapest for a FLOPs-only target.
  const FrontierPlan& closest(const Target& t) const;
  /// The plan with this canonical text, or null.
  const FrontierPlan* find(const std::string& plan) const;
  /// Replaces each plan text by `canon(text)` (the server's canonical spelling). @throws what canon throws.
  template <class F>
  void canonicalise(F canon) {
    for (auto& p : plans_) p.plan = canon(p.plan);
  }
  const std::vector<FrontierPlan>& plans() const { return plans_; }
  const std::string& source() const { return source_; }
  double reference_accuracy() const { return reference_accuracy_; }

 private:
  std::vector<FrontierPlan> plans_;  // FLOPs ratio ascending
  std::string source_, model_hash_, model_;
  double reference_accuracy_ = 0;
};

}  // namespace vispco::serve
