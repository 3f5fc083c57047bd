// The scorer registry table and the checks shared by every scorer.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/errors.h"
#include "core/named_table.h"
#include "prune/scorer.h"
#include "prune/scorers/scorers.h"
#include "prune/selector.h"

namespace vispco {

const std::vector<ScorerEntry>& scorer_registry() {
  static const std::vector<ScorerEntry> table = {
      {"fastv",
       "FastV (Chen et al., ECCV 2024 §4): last prompt token's attention at layer ℓ−1, head mean, top-K",
       make_fastv_scorer, 2},
      {"visionzip",
       "VisionZip (Yang et al., CVPR 2025 §3): [CLS]-attention dominant tokens + merged contextual ones",
       make_visionzip_scorer},
      {"divprune", "DivPrune (Alvar et al., CVPR 2025 §3): greedy max–min diversity on cosine distance",
       make_divprune_scorer},
      {"sparsevlm",
       "SparseVLM (Zhang et al., ICML 2025 §3): relevant text raters' attention at layer ℓ−1, pruned tokens "
       "recycled into merged ones",
       make_sparsevlm_scorer, 2},
      {"dart",
       "DART (Wen et al., EMNLP 2025 §4): keep tokens least similar to key-norm pivots, no attention map",
       make_dart_scorer, 2},
      {"cdpruner",
       "CDPruner (Zhang et al., NeurIPS 2025 §3): greedy DPP MAP on instruction-relevance-weighted "
       "similarity",
       make_cdpruner_scorer},
      {"grad", "gradient saliency |∂ log p(first answer token) / ∂ token|, one backward pre-pass",
       make_gradient_scorer},
      {"gate", "learned sigmoid gate after the projector (vispco train-gate), top-K by gate logit",
       make_gate_scorer},
      {"random", "random subset (seeded), a baseline", make_random_scorer},
      {"uniform", "uniform subsample of the patch grid in raster order, a baseline", make_uniform_scorer},
      {"base_view",
       "the base (downscaled, global) view's tokens of a tiling family such as LLaVA-NeXT, uniformly "
       "subsampled to K (ℓ = 0): the tiles dropped, a baseline",
       make_base_view_scorer},
      {"pool", "average pooling of the patch grid to √K × √K tokens (ℓ = 0), a baseline", make_pool_scorer},
  };
  return table;
}

namespace {

const ScorerEntry& entry(const std::string& name) {
  return find_named(scorer_registry(), name, "scorer", ", and the shorthand pdrop");
}

}  // namespace

std::unique_ptr<Scorer> make_scorer(const std::string& name) { return entry(name).make(); }

int64_t default_layer(const std::string& name) { return entry(name).default_layer; }

void Scorer::check(const PruneStage& stage, const ModelShape& shape) const {
  const std::string where = "plan stage " + stage.scorer + ":layer=" + std::to_string(stage.layer);
  if (hook_point() == HookPoint::kPreLlm && stage.layer != 0)
    throw InvalidArgument(where + ": " + stage.scorer + " acts before the LLM only (layer=0)");
  if (hook_point() == HookPoint::kInLlm && stage.layer == 0)
    throw InvalidArgument(where + ": " + stage.scorer +
                          " acts inside the LLM (on layer ℓ−1's output), so layer must be ≥ 1");
  auto valid = option_names();
  std::unique_ptr<Selector> selector;
  if (auto it = stage.options.find("select"); it != stage.options.end()) {
    selector = make_selector(it->second);
    if (!provides_scores())
      throw InvalidArgument(
          where + ": " + stage.scorer + " chooses tokens by its own rule and has no per-token " +
          "score for select=" + it->second + " (scorers with one: " + join_names(scoring_scorers()) + ")");
    const auto own = selection_option_names();
    std::erase_if(valid,
                  [&](const std::string& o) { return std::find(own.begin(), own.end(), o) != own.end(); });
    valid.push_back("select");
    for (const auto& o : selector->option_names()) valid.push_back(o);
  }
  // select= is an option of every scorer with per-token scores (already listed when the stage has one).
  if (!selector && provides_scores()) valid.push_back("select");
  for (const auto& [k, v] : stage.options)
    if (std::find(valid.begin(), valid.end(), k) == valid.end())
      throw InvalidArgument(where + ": unknown option '" + k +
                            "' (valid: " + (valid.empty() ? "none" : join_names(valid)) + ")");
  if (selector)
    selector->check(stage);
  else
    check_extra(stage, shape);
}

Selection Scorer::select(const ScoreInput& in) const {
  Selection s;
  s.scores = score(in);  // [B, N]
  s.keep = top_k_indices(s.scores, in.stage->keep);
  return s;
}

at::Tensor Scorer::score(const ScoreInput& in) const {
  throw InvalidArgument("plan stage " + (in.stage ? in.stage->scorer : std::string("?")) +
                        ": this scorer has no per-token score");
}

std::vector<std::string> scoring_scorers() {
  std::vector<std::string> out;
  for (const auto& e : scorer_registry())
    if (e.make()->provides_scores()) out.push_back(e.name);
  return out;
}

AttentionQueries Scorer::attention_queries(const ScoreInput& in) const {
  // The last prompt token: given in training, else (left padding) the last column of every row.
  if (in.query_pos.defined()) return {in.query_pos.view({-1, 1}), at::Tensor()};
  const int64_t B = in.state->hidden.size(0), T = in.state->hidden.size(1);
  return {at::full({B, 1}, T - 1, in.state->positions.options()), at::Tensor()};
}

at::Tensor top_k_indices(const at::Tensor& scores, int64_t k) {
  return std::get<1>(scores.topk(k, /*dim=*/-1, /*largest=*/true, /*sorted=*/true));
}

}  // namespace vispco
