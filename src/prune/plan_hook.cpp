// Applying a pruning plan's stages to the decoder's token state.
#include "prune/plan_hook.h"

#include <ATen/ATen.h>

#include <limits>

#include "core/errors.h"
#include "prune/selector.h"

namespace vispco {
namespace {

// The images' patch grid as scorers read it (ScoreInput::grid is the side of a square grid, else 0).
void set_grid(ScoreInput& in, const VisualLayout& layout) {
  in.grid_rows = layout.grid_rows;
  in.grid_cols = layout.grid_cols;
  in.grid = layout.grid_rows == layout.grid_cols ? layout.grid_rows : 0;
}

// Positions of merged tokens that stand for patches `rep` [B, M]. 1-D: patch g sits at (first visual
// token's position − its patch index) + g. M-RoPE (build_prefill_state): every visual token's temporal
// position is the image's p₀, and patch g = r·cols + c sits at (p₀, p₀ + r, p₀ + c).
at::Tensor merged_positions(const TokenState& state, const at::Tensor& first, const at::Tensor& rep,
                            const VisualLayout& layout) {
  if (state.positions.dim() == 2)
    return state.positions.gather(1, first) - state.grid_index.gather(1, first) + rep;
  auto p0 = state.positions[0].gather(1, first);  // [B, 1]
  return at::stack(
      {p0.expand_as(rep), p0 + rep.div(layout.grid_cols, "floor"), p0 + rep.remainder(layout.grid_cols)}, 0);
}

}  // namespace

std::vector<std::shared_ptr<const Scorer>> bind_scorers(const PruningPlan& plan, const ModelShape& shape,
                                                        const ScorerEnv& env) {
  plan.validate(shape);
  std::vector<std::shared_ptr<const Scorer>> out;
  for (const auto& st : plan.stages) {
    std::shared_ptr<Scorer> s = make_scorer(st.scorer);
    s->bind(st, shape, env);
    out.push_back(std::move(s));
  }
  return out;
}

PlanHook::PlanHook(PruningPlan plan, const ModelShape& shape, uint64_t seed, const ScorerEnv& env)
    : PlanHook(plan, shape, seed, bind_scorers(plan, shape, env)) {}

PlanHook::PlanHook(PruningPlan plan, const ModelShape& shape, uint64_t seed,
                   std::vector<std::shared_ptr<const Scorer>> scorers)
    : plan_(std::move(plan)),
      stages_(plan_.stages),
      scorers_(std::move(scorers)),
      layout_(shape.default_layout()),
      seed_(seed) {
  if (scorers_.size() != plan_.stages.size())
    throw InvalidArgument("plan hook: " + std::to_string(scorers_.size()) + " bound scorers for " +
                          std::to_string(plan_.stages.size()) + " stages");
  for (const auto& st : plan_.stages) {
    auto sel = st.options.find("select");
    selectors_.push_back(sel == st.options.end() ? nullptr : make_selector(sel->second));
  }
}

bool PlanHook::wants_vision_attention() const {
  for (const auto& s : scorers_)
    if (s->needs().vision_attention) return true;
  return false;
}

void PlanHook::begin(const at::Tensor& cls_attention, const at::Tensor& vision_keys,
                     const VisualLayout& layout) {
  layout_ = layout;
  if (layout.n_tokens > 0)  // each keep=P% stage's K for these images
    for (size_t i = 0; i < stages_.size(); ++i)
      stages_[i].keep = resolve_keep(plan_.stages[i], layout.n_tokens);
  cls_attention_ = cls_attention;
  vision_keys_ = vision_keys;
  saliency_ = at::Tensor();
  input_ = TokenState();
  query_weights_ = at::Tensor();
  traces_.clear();
}

bool PlanHook::wants_visual_saliency() const {
  for (const auto& s : scorers_)
    if (s->needs().saliency) return true;
  return false;
}

void PlanHook::set_visual_saliency(const at::Tensor& saliency) { saliency_ = saliency; }

bool PlanHook::acts_before(int64_t layer) const {
  for (const auto& st : stages_)
    if (st.layer == layer) return true;
  return false;
}

at::Tensor PlanHook::attention_rows(int64_t layer, const TokenState& state) {
  if (layer == 0) input_ = state;  // the LLM's input (rater selection of text-guided scorers)
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i].layer == layer + 1 && scorers_[i]->needs().attention) {
      const int64_t B = state.hidden.size(0);
      ScoreInput in;
      in.state = &state;
      in.visual_pos = at::nonzero(state.visual).select(1, 1).view({B, -1});
      in.input_state = input_.hidden.defined() ? &input_ : nullptr;
      set_grid(in, layout_);
      in.layer = layer + 1;
      in.seed = seed_;
      in.stage = &stages_[i];
      auto q = scorers_[i]->attention_queries(in);
      query_weights_ = q.weights;
      return q.rows;
    }
  return {};
}

bool PlanHook::wants_keys(int64_t layer) const {
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i].layer == layer + 1 && scorers_[i]->needs().keys) return true;
  return false;
}

bool PlanHook::apply(int64_t layer, TokenState& state, const LayerSignals& signals) {
  size_t i = 0;
  while (i < stages_.size() && stages_[i].layer != layer) ++i;
  if (i == stages_.size()) return false;
  const auto& stage = stages_[i];
  const int64_t B = state.hidden.size(0), T = state.hidden.size(1);
  const auto dev = state.hidden.device();
  auto nz = at::nonzero(state.visual);  // [B·N, 2], row-major so each row's indices ascend
  const int64_t N = nz.size(0) / B;
  TORCH_CHECK(N * B == nz.size(0), "rows of a batch hold different numbers of visual tokens");

  StageTrace trace;
  trace.stage = stage;
  // On the prefill's device: recording costs two scatters there, no copy to the host (readers move them).
  trace.scores = at::full({B, layout_.n_tokens}, std::numeric_limits<float>::quiet_NaN(),
                          at::device(dev).dtype(at::kFloat));
  trace.kept = at::zeros({B, layout_.n_tokens}, at::device(dev).dtype(at::kBool));
  if (stage.keep >= N) {  // nothing to remove at this stage
    traces_.push_back(trace);
    return false;
  }
  ScoreInput in;
  in.state = &state;
  in.visual_pos = nz.select(1, 1).view({B, N});
  in.attn_rows = signals.attn_rows;
  in.attn_weights = query_weights_;
  in.keys = signals.keys;
  in.input_state = layer > 0 && input_.hidden.defined() ? &input_ : nullptr;
  in.saliency = saliency_;
  in.cls_attention = cls_attention_;
  in.vision_keys = vision_keys_;
  set_grid(in, layout_);
  in.layer = layer;
  in.seed = seed_;
  in.stage = &stage;
  const auto& scorer = *scorers_[i];
  if (scorer.needs().attention && !signals.attn_rows.defined())
    throw InvalidArgument("scorer " + stage.scorer + " needs decoder attention but none was recorded");
  if (scorer.needs().keys && !signals.keys.defined())
    throw InvalidArgument("scorer " + stage.scorer + " needs layer " + std::to_string(layer - 1) +
                          "'s keys but none were recorded");
  if (scorer.needs().saliency && !saliency_.defined())
    throw InvalidArgument("scorer " + stage.scorer +
                          " needs the gradient pre-pass (run it through generate(), which computes it)");
  Selection sel = selectors_[i] ? selectors_[i]->select(scorer.score(in), in) : scorer.select(in);

  auto grid_of_alive = state.grid_index.gather(1, in.visual_pos);  // [B, N]
  if (sel.scores.defined()) trace.scores.scatter_(1, grid_of_alive, sel.scores.to(dev, at::kFloat));
  auto kept_visual = in.visual_pos.gather(1, sel.keep.to(dev));  // [B, K_keep] indices into T
  trace.kept.scatter_(1, state.grid_index.gather(1, kept_visual), true);

  // Non-visual tokens (text, padding) in order, plus the kept visual ones, re-sorted into sequence order.
  auto is_text = state.visual.logical_not();
  auto text_idx = at::nonzero(is_text).select(1, 1).view({B, T - N});
  auto keep_idx = std::get<0>(at::cat({text_idx, kept_visual}, 1).sort(1));
  TokenState next = gather_tokens(state, keep_idx);
  if (sel.merged.defined() && sel.merged.size(1) > 0) {
    const int64_t M = sel.merged.size(1);
    auto rep = sel.merged_grid_index.to(dev);
    trace.kept.scatter_(1, rep, true);
    trace.merged = true;
    auto first = in.visual_pos.narrow(1, 0, 1);
    TokenState merged;
    merged.hidden = sel.merged.to(next.hidden.scalar_type());
    merged.positions = merged_positions(state, first, rep, layout_);
    merged.valid = at::ones({B, M}, next.valid.options());
    merged.visual = at::ones({B, M}, next.visual.options());
    merged.grid_index = rep;
    // Sort key: text keeps its index in T; a visual token sits inside the image span by patch index.
    auto v0 = in.visual_pos.narrow(1, 0, 1).to(at::kDouble);  // [B, 1]
    auto key_of = [&](const TokenState& s, const at::Tensor& t_index) {
      auto vis_key = v0 + (s.grid_index.to(at::kDouble) + 0.5) / double(layout_.n_tokens + 1);
      return at::where(s.visual, vis_key, t_index.to(at::kDouble));
    };
    auto keys = at::cat({key_of(next, keep_idx), key_of(merged, at::zeros({B, M}, keep_idx.options()))}, 1);
    auto order = std::get<1>(keys.sort(1));
    TokenState all;
    all.hidden = at::cat({next.hidden, merged.hidden}, 1);
    all.positions = at::cat({next.positions, merged.positions}, next.positions.dim() - 1);
    all.valid = at::cat({next.valid, merged.valid}, 1);
    all.visual = at::cat({next.visual, merged.visual}, 1);
    all.grid_index = at::cat({next.grid_index, merged.grid_index}, 1);
    next = gather_tokens(all, order);
  }
  state = next;
  traces_.push_back(trace);
  return true;
}

}  // namespace vispco
