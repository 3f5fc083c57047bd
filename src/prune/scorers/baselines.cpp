// Baselines every serious token-pruning comparison includes: a seeded random subset, a uniform subsample of
// the patch grid, and average pooling of the grid (the spatial-pooling baseline of e.g. LLaVA-PruMerge and
// VisionZip's comparisons).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "core/errors.h"
#include "prune/question_independent.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

class RandomScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kAny; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  bool provides_scores() const override { return true; }
  at::Tensor score(const ScoreInput& in) const override {
    // One CPU generator per stage: the same seed picks the same tokens on any device.
    auto gen =
        at::make_generator<at::CPUGeneratorImpl>(in.seed * 1000003ULL + static_cast<uint64_t>(in.layer));
    return at::rand({in.visual_pos.size(0), in.visual_pos.size(1)}, gen).to(in.visual_pos.device());
  }
};

class UniformScorer : public Scorer, public QuestionIndependent {
 public:
  bool question_independent() const override { return true; }
  HookPoint hook_point() const override { return HookPoint::kAny; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    // Token i of K sits at the centre of the i-th of K equal stretches of the N alive tokens (raster order).
    auto idx = at::floor((at::arange(K, at::kDouble) + 0.5) * (double(N) / double(K))).to(at::kLong);
    Selection s;
    s.keep = idx.to(in.visual_pos.device()).unsqueeze(0).expand({B, K}).contiguous();
    return s;
  }
};

// The base (global, downscaled) view of a tiling family (LLaVA-NeXT's base image features): the first
// N_v − rows·cols tokens of an image, before its high-resolution grid (VisualLayout). Keeping them drops the
// tiles: the "base view alone" ablation at K = n_base, and a uniform subsample of it below.
class BaseViewScorer : public Scorer, public QuestionIndependent {
 public:
  bool question_independent() const override { return true; }
  HookPoint hook_point() const override { return HookPoint::kPreLlm; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  bool applies_to(const ModelShape& shape) const override { return n_base(shape) > 0; }
  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = in.stage->keep;
    const int64_t n_base = N - in.grid_rows * in.grid_cols;
    if (n_base <= 0)
      throw InvalidArgument("base_view: this model's images have no base view (all " + std::to_string(N) +
                            " visual tokens form the " + std::to_string(in.grid_rows) + "×" +
                            std::to_string(in.grid_cols) + " patch grid)");
    if (K > n_base)
      throw InvalidArgument("base_view: keep " + std::to_string(K) + " exceeds the " +
                            std::to_string(n_base) + " tokens of the base view");
    auto idx = at::floor((at::arange(K, at::kDouble) + 0.5) * (double(n_base) / double(K))).to(at::kLong);
    Selection s;
    s.keep = idx.to(in.visual_pos.device()).unsqueeze(0).expand({B, K}).contiguous();
    return s;
  }

 protected:
  void check_extra(const PruneStage& st, const ModelShape& shape) const override {
    if (n_base(shape) <= 0)
      throw InvalidArgument("plan stage base_view: this model's images have no base view (" +
                            shape.architecture + ": the visual tokens are one patch grid)");
    if (st.keep > n_base(shape))
      throw InvalidArgument("plan stage base_view: keep " + std::to_string(st.keep) + " exceeds the " +
                            std::to_string(n_base(shape)) + " tokens of the base view");
  }

 private:
  // Base-view tokens of the shape's largest image: N_v less the high-resolution grid (and a [CLS] token).
  static int64_t n_base(const ModelShape& shape) {
    return shape.n_visual_tokens - shape.grid_rows * shape.grid_cols - (shape.has_cls_token ? 1 : 0);
  }
};

class PoolScorer : public Scorer, public QuestionIndependent {
 public:
  bool question_independent() const override { return true; }
  HookPoint hook_point() const override { return HookPoint::kPreLlm; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  // Only models whose visual tokens are one whole patch grid ([CLS] aside): not LLaVA-NeXT's base + tiles.
  bool applies_to(const ModelShape& shape) const override {
    return shape.grid_rows * shape.grid_cols == shape.n_visual_tokens - (shape.has_cls_token ? 1 : 0);
  }
  Selection select(const ScoreInput& in) const override {
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1);
    const int64_t rows = in.grid_rows, cols = in.grid_cols;
    if (rows * cols != N)
      throw InvalidArgument("pool needs the whole patch grid (" + std::to_string(rows) + "×" +
                            std::to_string(cols) + " patches), got " + std::to_string(N) + " visual tokens");
    const int64_t side = std::llround(std::sqrt(double(in.stage->keep)));
    const auto& h = in.state->hidden;
    auto tokens = h.gather(1, in.visual_pos.unsqueeze(-1).expand({B, N, h.size(2)}));  // [B, N_v, D]
    auto img = tokens.view({B, rows, cols, h.size(2)}).permute({0, 3, 1, 2});          // [B, D, rows, cols]
    auto pooled = at::adaptive_avg_pool2d(img.to(at::kFloat), {side, side}).to(h.scalar_type());
    Selection s;
    s.keep = at::empty({B, 0}, in.visual_pos.options());
    s.merged = pooled.flatten(2).transpose(1, 2).contiguous();  // [B, side², D]
    // Each pooled cell is placed at its top-left patch (adaptive pooling's cell start ⌊i·n/side⌋).
    auto start = [&](int64_t n) {
      return at::floor(at::arange(side, at::kDouble) * (double(n) / side)).to(at::kLong);
    };
    auto rep = (start(rows).unsqueeze(1) * cols + start(cols).unsqueeze(0)).flatten();
    s.merged_grid_index = rep.to(in.visual_pos.device()).unsqueeze(0).expand({B, side * side}).contiguous();
    return s;
  }

 protected:
  void check_extra(const PruneStage& st, const ModelShape& shape) const override {
    const int64_t side = std::llround(std::sqrt(double(st.keep)));
    if (side * side != st.keep || side > shape.grid_side())
      throw InvalidArgument("plan stage pool: keep " + std::to_string(st.keep) +
                            " must be a square s² with s ≤ the patch grid side " +
                            std::to_string(shape.grid_side()));
  }
};

}  // namespace

std::unique_ptr<Scorer> make_random_scorer() { return std::make_unique<RandomScorer>(); }
std::unique_ptr<Scorer> make_uniform_scorer() { return std::make_unique<UniformScorer>(); }
std::unique_ptr<Scorer> make_base_view_scorer() { return std::make_unique<BaseViewScorer>(); }
std::unique_ptr<Scorer> make_pool_scorer() { return std::make_unique<PoolScorer>(); }

}  // namespace vispco
