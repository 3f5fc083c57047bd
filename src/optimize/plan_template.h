// A plan template: a pruning plan with one free parameter that the searches vary (DESIGN.md §6) — the kept
// visual tokens K of a stage ("fastv:layer=2", or any plan with "{K}", as in `vispco bench --sweep-plan`), or
// the keep ratio λ of a PyramidDrop plan ("pdrop:layers=2/4/6", λ in thousandths).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.h"
#include "prune/plan.h"

namespace vispco::optimize {

/// What the template's parameter p means.
enum class TemplateParam {
  kKeep,        ///< p = K, kept visual tokens, in [1, N_v]
  kPdropRatio,  ///< p = λ·1000, PyramidDrop keep ratio per stage boundary, in [1, 1000]
};

/// A parsed plan template bound to a model config.
class PlanTemplate {
 public:
  /// Parses `text`: "scorer:layer=ℓ" (one stage, keep appended), a plan with "{K}" where K goes, or
  /// "pdrop:layers=a/b/c[,scorer=s]" without ratio (λ free). Checks that the plan at the largest parameter
  /// fits `shape` (PruningPlan::validate).
  /// @throws InvalidArgument naming the template and the problem (e.g. it fixes keep= itself, unknown scorer,
  ///         layer outside the model).
  static PlanTemplate parse(const std::string& text, const ModelShape& shape);

  const std::string& text() const { return text_; }
  TemplateParam param() const { return param_; }
  /// Smallest and largest parameter: [1, N_v] for K, [1, 1000] for λ·1000.
  int64_t param_min() const { return 1; }
  int64_t param_max() const { return param_max_; }
  /// True when every stage acts before the LLM (ℓ = 0).
  bool pre_llm() const { return pre_llm_; }
  /// The plan at parameter p (not validated against the model: see valid_at()).
  /// @throws InvalidArgument when p is outside [param_min, param_max].
  PruningPlan at(int64_t p) const;
  /// Whether the plan at p fits the model (e.g. `pool` needs K = s²); when not and `why` is set, the reason.
  bool valid_at(int64_t p, std::string* why = nullptr) const;
  /// p as a user reads it: "64" for K, "0.350" for λ.
  std::string param_text(int64_t p) const;

 private:
  std::string text_;
  TemplateParam param_ = TemplateParam::kKeep;
  int64_t param_max_ = 0;
  bool pre_llm_ = false;
  ModelShape shape_;
};

/// Splits a ';'-separated list of templates (empty pieces dropped).
std::vector<std::string> split_templates(const std::string& text);

}  // namespace vispco::optimize
