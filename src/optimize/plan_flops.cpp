// Plan → tokens per layer → FLOPs model; see plan_flops.h.
#include "optimize/plan_flops.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/errors.h"
#include "cost/flops.h"

namespace vispco::optimize {
namespace {

// plan_tokens_per_layer without the checks (the plan is already validated), for an image of spec's N_v.
std::vector<int64_t> tokens_unchecked(const PruningPlan& plan, const FlopsSpec& spec, int64_t n_text) {
  std::vector<int64_t> tokens = unpruned_tokens_per_layer(spec, n_text);
  for (const PruneStage& s : plan.stages) {  // stages are in increasing layer order (validate)
    const int64_t keep = std::min(resolve_keep(s, spec.n_visual_tokens), spec.n_visual_tokens);
    for (size_t i = static_cast<size_t>(s.layer); i < tokens.size(); ++i) tokens[i] = n_text + keep;
  }
  return tokens;
}

}  // namespace

std::vector<int64_t> plan_tokens_per_layer(const PruningPlan& plan, const ModelShape& shape, int64_t n_text) {
  if (n_text < 0)
    throw InvalidArgument("plan FLOPs: text token count must be ≥ 0, got " + std::to_string(n_text));
  plan.validate(shape);
  return tokens_unchecked(plan, shape.flops, n_text);
}

FlopsRatio plan_flops_ratio(const PruningPlan& plan, const ModelShape& shape,
                            const std::vector<int64_t>& n_texts, const std::vector<FlopsSpec>& images) {
  if (n_texts.empty()) throw InvalidArgument("plan FLOPs: no prompts to cost (empty text-length list)");
  if (!images.empty() && images.size() != n_texts.size())
    throw InvalidArgument("plan FLOPs: " + std::to_string(images.size()) + " image specs for " +
                          std::to_string(n_texts.size()) + " prompts");
  plan.validate(shape);
  // (N_t, index of a distinct image spec) → prompts of that kind (few distinct lengths and image sizes).
  std::vector<const FlopsSpec*> specs{&shape.flops};
  std::map<std::pair<int64_t, size_t>, double> count;
  for (size_t i = 0; i < n_texts.size(); ++i) {
    const int64_t n = n_texts[i];
    if (n < 0) throw InvalidArgument("plan FLOPs: text token count must be ≥ 0, got " + std::to_string(n));
    size_t k = 0;
    if (!images.empty()) {
      const auto same = [&](const FlopsSpec* s) { return *s == images[i]; };
      k = static_cast<size_t>(std::find_if(specs.begin(), specs.end(), same) - specs.begin());
      if (k == specs.size()) specs.push_back(&images[i]);
    }
    count[{n, k}] += 1;
  }
  // Sums in double: 2000 prompts × ~10¹² FLOPs stay exact enough (relative error ~10⁻¹⁶ per term).
  double plan_llm = 0, full_llm = 0, vision = 0;
  for (const auto& [key, c] : count) {
    const auto [n, k] = key;
    const FlopsSpec& spec = *specs[k];
    const PrefillFlops p = prefill_flops(spec, tokens_unchecked(plan, spec, n));
    const PrefillFlops u = prefill_flops(spec, unpruned_tokens_per_layer(spec, n));
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
