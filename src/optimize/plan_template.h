// A plan template: a pruning plan with one free parameter that the searches vary (DESIGN.md §6) — the kept
// visual tokens K of a stage ("fastv:layer=2", or any plan with "{K}", as in `vispco bench --sweep-plan`),
// the keep ratio P of each image's own N_v ("fastv:layer=2,keep={P}%", P in thousandths: for families whose
// images make different numbers of visual tokens, issue 47), or the keep ratio λ of a PyramidDrop plan
// ("pdrop:layers=2/4/6", λ in thousandths).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/shape.h"
#include "prune/plan.h"

namespace vispco::optimize {

/// What the template's parameter p means.
enum class TemplateParam {
  kKeep,         ///< p = K, kept visual tokens, in [1, N_v]
  kKeepPercent,  ///< p = keep ratio in ‰ of each image's own N_v (keep={P}% → keep=p/10 %), in [1, 1000]
  kPdropRatio,   ///< p = λ·1000, PyramidDrop keep ratio per stage boundary, in [1, 1000]
};

/// Whether one-stage templates without keep vary a count or a keep ratio (`vispco optimize --keep-as`).
enum class KeepAs {
  kAuto,   ///< a ratio when the model's images make their own N_v (model/n_visual_varies.h), else a count
  kRatio,  ///< "fastv:layer=2" becomes "fastv:layer=2,keep={P}%"
  kCount,  ///< "fastv:layer=2" varies K, as before issue 47
};
/// "auto" | "ratio" | "count" → KeepAs. @throws InvalidArgument naming the text and the valid values.
KeepAs parse_keep_as(const std::string& text);
/// Whether `keep_as` means ratios for a model of this shape.
bool keep_as_ratio(KeepAs keep_as, const ModelShape& shape);
/// The template as `keep_as` makes it for this model: with ratios, a one-stage template that leaves keep out
/// gets ",keep={P}%" ("fastv:layer=2" → "fastv:layer=2,keep={P}%", "divprune" → "divprune:keep={P}%");
/// templates that say where K or P goes, several stages and PyramidDrop templates stay as given.
std::string apply_keep_as(const std::string& text, KeepAs keep_as, const ModelShape& shape);
/// Whether the template text varies a keep ratio (holds "{P}").
bool is_keep_ratio_template(const std::string& text);

/// A parsed plan template bound to a model config.
class PlanTemplate {
 public:
  /// Parses `text`: "scorer:layer=ℓ" (one stage, keep appended), a plan with "{K}" where K goes, a plan with
  /// "keep={P}%" where the keep ratio goes (every "{P}" followed by '%'), or "pdrop:layers=a/b/c[,scorer=s]"
  /// without ratio (λ free). Checks that the plan at the largest parameter fits `shape`
  /// (PruningPlan::validate).
  /// @throws InvalidArgument naming the template and the problem (e.g. it fixes keep= itself, "{P}" without
  ///         '%', both "{K}" and "{P}", unknown scorer, layer outside the model).
  static PlanTemplate parse(const std::string& text, const ModelShape& shape);

  const std::string& text() const { return text_; }
  TemplateParam param() const { return param_; }
  /// Smallest and largest parameter: [1, N_v] for K (N_v of the nominal image), [1, 1000] for ratios.
  int64_t param_min() const { return 1; }
  int64_t param_max() const { return param_max_; }
  /// True when every stage acts before the LLM (ℓ = 0).
  bool pre_llm() const { return pre_llm_; }
  /// The plan at parameter p (not validated against the model: see valid_at()). A keep-ratio plan's stages
  /// carry keep_percent = p/10 and, as keep, the count at the nominal N_v (resolve_keep).
  /// @throws InvalidArgument when p is outside [param_min, param_max].
  PruningPlan at(int64_t p) const;
  /// Whether the plan at p fits the model (e.g. `pool` needs K = s²); when not and `why` is set, the reason.
  bool valid_at(int64_t p, std::string* why = nullptr) const;
  /// p as a user reads it: "64" for K, "25.0%" for a keep ratio, "0.350" for λ.
  std::string param_text(int64_t p) const;
  /// What p is called in reports: "K", "keep ratio" or "λ".
  std::string param_name() const;

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
