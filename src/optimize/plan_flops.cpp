// Plan → tokens per layer → FLOPs model; see plan_flops.h.
#include "optimize/plan_flops.h"

#include <map>
#include <string>

#include "core/errors.h"
#include "cost/flops.h"

namespace vispco::optimize {
namespace {

// plan_tokens_per_layer without the checks (the plan is already validated).
std::vector<int64_t> tokens_unchecked(const PruningPlan& plan, const ModelShape& shape, int64_t n_text) {
  std::vector<int64_t> tokens = unpruned_tokens_per_layer(shape.flops, n_text);
  for (const PruneStage& s : plan.stages)  // stages are in increasing layer order (validate)
    for (size_t i = static_cast<size_t>(s.layer); i < tokens.size(); ++i) tokens[i] = n_text + s.keep;
  return tokens;
}

}  // namespace

std::vector<int64_t> plan_tokens_per_layer(const PruningPlan& plan, const ModelShape& shape, int64_t n_text) {
  if (n_text < 0)
    throw InvalidArgument("plan FLOPs: text token count must be ≥ 0, got " + std::to_string(n_text));
  plan.validate(shape);
  return tokens_unchecked(plan, shape, n_text);
}

FlopsRatio plan_flops_ratio(const PruningPlan& plan, const ModelShape& shape,
                            const std::vector<int64_t>& n_texts) {
  if (n_texts.empty()) throw InvalidArgument("plan FLOPs: no prompts to cost (empty text-length list)");
  plan.validate(shape);
  std::map<int64_t, double> count;  // N_t → prompts of that length (few distinct lengths)
  for (const int64_t n : n_texts) {
    if (n < 0) throw InvalidArgument("plan FLOPs: text token count must be ≥ 0, got " + std::to_string(n));
    count[n] += 1;
  }
  // Sums in double: 2000 prompts × ~10¹² FLOPs stay exact enough (relative error ~10⁻¹⁶ per term).
  double plan_llm = 0, full_llm = 0, vision = 0;
  for (const auto& [n, c] : count) {
    const PrefillFlops p = prefill_flops(shape.flops, tokens_unchecked(plan, shape, n));
    const PrefillFlops u = prefill_flops(shape.flops, unpruned_tokens_per_layer(shape.flops, n));
    plan_llm += c * static_cast<double>(p.decoder_total + p.lm_head);
    full_llm += c * static_cast<double>(u.decoder_total + u.lm_head);
    vision += c * static_cast<double>(p.vision + p.projector);
  }
  FlopsRatio r;
  r.llm = plan_llm / full_llm;
  r.with_vision = (plan_llm + vision) / (full_llm + vision);
  r.mean_llm_flops = plan_llm / static_cast<double>(n_texts.size());
  r.mean_vision_flops = vision / static_cast<double>(n_texts.size());
  return r;
}

}  // namespace vispco::optimize
