// Training-mode soft pruning with straight-through masks (VisPCO §3.2), scoring through the scorer registry.
#include "optimize/learned/soft_prune.h"

#include <ATen/ATen.h>

#include "core/errors.h"

namespace vispco::optimize::learned {

namespace {
bool qualifies(const Scorer& s) {
  const auto n = s.needs();
  return s.provides_scores() && s.hook_point() != HookPoint::kPreLlm && n.prompt_only &&
         !n.vision_attention && !n.keys && !n.saliency;
}
}  // namespace

void check_soft_prune_scorer(const std::string& name) {
  std::string valid;
  bool known = false, ok = false;
  for (const auto& e : scorer_registry()) {
    const bool q = qualifies(*e.make());
    if (q) valid += (valid.empty() ? "" : ", ") + e.name;
    if (e.name == name) known = true, ok = q;
  }
  if (ok) return;
  throw InvalidArgument(
      known ? "VisPCO: scorer '" + name +
                  "' cannot score inside a teacher-forced training forward (valid: " + valid + ")"
            : "VisPCO: unknown scorer '" + name + "' (valid: " + valid + ")");
}

SoftPruneHook::SoftPruneHook(at::Tensor fractions, at::Tensor visual_pos, at::Tensor query_pos,
                             int64_t first_layer, const Scorer& scorer, std::string scorer_name,
                             const SoftThresholdSelector& selector, uint64_t seed)
    : fractions_(std::move(fractions)),
      visual_pos_(std::move(visual_pos)),
      query_pos_(std::move(query_pos)),
      first_(first_layer),
      scorer_(&scorer),
      scorer_name_(std::move(scorer_name)),
      selector_(&selector),
      seed_(seed) {
  const int64_t B = fractions_.size(0);
  if (fractions_.dim() != 2 || visual_pos_.dim() != 2 || visual_pos_.size(0) != B || query_pos_.dim() != 1 ||
      query_pos_.size(0) != B)
    throw InvalidArgument("SoftPruneHook: expected fractions [B, L], visual_pos [B, N_v], query_pos [B]");
  if (first_ < 1 || first_ >= fractions_.size(1))
    throw InvalidArgument("SoftPruneHook: first pruned layer must be in [1, L), got " +
                          std::to_string(first_));
  n_visual_ = visual_pos_.size(1);
  alive_ = at::ones({B, n_visual_}, visual_pos_.options().dtype(at::kBool));
}

ScoreInput SoftPruneHook::score_input(int64_t layer, const TokenState& state, const PruneStage& stage) const {
  ScoreInput in;
  in.state = &state;
  in.visual_pos = visual_pos_;  // every visual token; the dead ones are masked by the selector
  in.query_pos = query_pos_;
  in.layer = layer;
  in.seed = seed_;
  in.stage = &stage;
  return in;
}

at::Tensor SoftPruneHook::attention_rows(int64_t layer, const TokenState& state) const {
  if (layer + 1 < first_ || layer + 1 >= fractions_.size(1) || !scorer_->needs().attention) return {};
  const PruneStage stage{layer + 1, n_visual_, scorer_name_, {}};
  return scorer_->attention_queries(score_input(layer + 1, state, stage)).rows;
}

at::Tensor SoftPruneHook::gate(int64_t layer, const TokenState& state, const at::Tensor& attn_rows) {
  const int64_t B = fractions_.size(0);
  if (layer < first_) {
    counts_.push_back(at::full({B}, n_visual_, at::TensorOptions().dtype(at::kLong)));
    return {};
  }
  const PruneStage stage{layer, n_visual_, scorer_name_, {}};
  auto in = score_input(layer, state, stage);
  if (scorer_->needs().attention) {
    TORCH_CHECK(attn_rows.defined(), "SoftPruneHook: no attention rows from layer ", layer - 1);
    in.attn_rows = attn_rows.detach().to(at::kFloat);
  }
  auto keep = fractions_.select(1, layer).to(at::kFloat) * double(n_visual_);
  auto m = selector_->relax(scorer_->score(in), alive_, keep);
  mask_ = mask_.defined() ? m.ste * mask_ : m.ste;
  alive_ = m.hard > 0.5;
  counts_.push_back(alive_.sum(1).cpu());
  const int64_t T = state.hidden.size(1);
  auto ones = at::ones({B, T}, mask_.options());
  return ones.scatter(1, visual_pos_, mask_);
}

at::Tensor SoftPruneHook::hard_counts() const {
  return counts_.empty() ? at::Tensor() : at::stack(counts_, 1);
}

}  // namespace vispco::optimize::learned
