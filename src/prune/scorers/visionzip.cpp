// VisionZip (Yang et al., "VisionZip: Longer is Better but Not Necessary in Vision Language Models",
// CVPR 2025, §3): before the LLM, keep the "dominant" tokens with the largest [CLS] attention at the vision
// feature layer, and merge the rest into M "contextual" tokens: targets at a uniform stride among the rest,
// each other token assigned to its most similar target by normalised attention keys. Default split as the
// paper's settings (54+10 for 64, 108+20 for 128, 162+30 for 192): M = round(K·10/64), option contextual=M.
// Deviations: the merge averages the projected tokens (after the projector, where our hook sits) rather than
// the tower's outputs, and a contextual token is the mean of its target and members (the paper's "average");
// the authors' release adds the target to the members' mean instead. Towers without a [CLS] token (Qwen2-VL,
// Qwen2.5-VL) give, in place of the [CLS] attention and keys, their last block's received attention and keys
// per merged token (model/qwen2_vl/vision_received.h), as VisionZip's adaptations to such towers do.
#include <ATen/ATen.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "prune/question_independent.h"
#include "prune/scorers/scorers.h"

namespace vispco {

std::pair<at::Tensor, at::Tensor> visionzip_merge(const at::Tensor& rest, const at::Tensor& keys, int64_t m) {
  const int64_t n = rest.size(0);
  const int64_t step = std::max<int64_t>(1, n / m);
  auto targets = at::arange(0, n, step, at::kLong).narrow(0, 0, m);
  auto unit = keys.to(at::kFloat) / keys.to(at::kFloat).norm(2, -1, true).clamp_min(1e-12);
  auto sim = at::matmul(unit, unit.index_select(0, targets).t());  // [N_r, M]
  auto assign = sim.argmax(1);                                     // [N_r]
  assign.index_put_({targets}, at::arange(m, at::kLong));          // a target belongs to itself
  auto sums = at::zeros({m, rest.size(1)}, rest.options().dtype(at::kFloat));
  sums.index_add_(0, assign, rest.to(at::kFloat));
  auto counts = at::bincount(assign, {}, m).to(at::kFloat).unsqueeze(1);
  return {(sums / counts).to(rest.scalar_type()), targets};
}

std::pair<at::Tensor, at::Tensor> merge_unkept(const at::Tensor& tokens, const at::Tensor& keys,
                                               const at::Tensor& keep, const at::Tensor& grid, int64_t m) {
  const int64_t B = tokens.size(0), N = tokens.size(1);
  std::vector<at::Tensor> merged, reps;
  for (int64_t b = 0; b < B; ++b) {
    auto is_rest = at::ones({N}, at::kBool);
    is_rest.index_put_({keep[b].cpu()}, false);
    auto rest_idx = at::nonzero(is_rest).squeeze(1).to(tokens.device());  // ascending
    auto [mt, targets] =
        visionzip_merge(tokens[b].index_select(0, rest_idx), keys[b].index_select(0, rest_idx), m);
    merged.push_back(mt);
    reps.push_back(grid[b].index_select(0, rest_idx.index_select(0, targets.to(rest_idx.device()))));
  }
  return {at::stack(merged), at::stack(reps)};
}

namespace {

class VisionZipScorer : public Scorer, public QuestionIndependent {
 public:
  bool question_independent() const override { return true; }
  HookPoint hook_point() const override { return HookPoint::kPreLlm; }
  ScorerNeeds needs() const override { return {.vision_attention = true, .prompt_only = true}; }
  std::vector<std::string> option_names() const override { return {"contextual"}; }
  std::vector<std::string> selection_option_names() const override { return {"contextual"}; }
  bool provides_scores() const override { return true; }
  // The tower's head-mean [CLS] attention to each patch (or, without [CLS], the attention each visual token
  // receives in the last block), [B, N] (the dominant tokens' ranking).
  at::Tensor score(const ScoreInput& in) const override {
    if (!in.cls_attention.defined())
      throw InvalidArgument(
          "visionzip needs the vision tower's [CLS] attention (or, for a tower without [CLS], the attention "
          "its tokens receive), and this model's tower gives neither; use a pre-LLM scorer without it, e.g. "
          "divprune or cdpruner");
    if (in.cls_attention.size(1) != in.visual_pos.size(1))
      throw InvalidArgument(
          "visionzip needs the tower's [CLS] attention over all N_v tokens (use it at layer=0, first)");
    return in.cls_attention;
  }

  static int64_t n_contextual(const PruneStage& st) {
    if (auto it = st.options.find("contextual"); it != st.options.end()) return std::stoll(it->second);
    return std::llround(st.keep * 10.0 / 64.0);
  }

  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    score(in);  // checks the [CLS] attention
    const int64_t m = n_contextual(*in.stage), dominant = K - m;
    const auto& h = in.state->hidden;
    auto tokens = h.gather(1, in.visual_pos.unsqueeze(-1).expand({B, N, h.size(2)}));
    Selection s;
    s.scores = in.cls_attention;
    s.keep = top_k_indices(in.cls_attention, dominant);
    if (m == 0) return s;
    // At ℓ = 0 the alive tokens are the patches in raster order: patch index = alive index.
    auto grid = at::arange(N, s.keep.options()).unsqueeze(0).expand({B, N});
    std::tie(s.merged, s.merged_grid_index) = merge_unkept(tokens, in.vision_keys, s.keep, grid, m);
    return s;
  }

 protected:
  void check_extra(const PruneStage& st, const ModelShape& shape) const override {
    int64_t m = 0;
    try {
      m = n_contextual(st);
    } catch (const std::exception&) {
      throw InvalidArgument("plan stage visionzip: contextual must be an integer");
    }
    if (m < 0 || m >= st.keep)
      throw InvalidArgument("plan stage visionzip: contextual " + std::to_string(m) +
                            " must be in [0, keep=" + std::to_string(st.keep) + ")");
    if (m > shape.n_visual_tokens - (st.keep - m))
      throw InvalidArgument("plan stage visionzip: not enough tokens left to merge into " +
                            std::to_string(m));
  }
};

}  // namespace

std::unique_ptr<Scorer> make_visionzip_scorer() { return std::make_unique<VisionZipScorer>(); }

}  // namespace vispco
