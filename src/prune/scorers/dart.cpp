// DART (Wen et al., "Stop Looking for Important Tokens in Multimodal Language Models: Duplication Matters
// More", EMNLP 2025, §4): after layer ℓ−1, pick a few pivot tokens — the visual and instruction tokens whose
// keys have the largest L1 norm (the release's choice) — keep the image pivots, and for each pivot keep the
// visual tokens least cosine-similar to it (its duplicates go); no attention map is needed, so it works
// with fused attention kernels.
// Pivot signal: layer ℓ−1's keys after RoPE, read from the KV cache, as the release's key states (option
// pivot=hidden ranks by the L2 norm of the layer's output hidden states instead, for engines without keys).
// Similarity: cosine of layer ℓ−1's output hidden states, as the release. Defaults pivots=4, text_pivots=4
// (the release's LLaVA-1.5 setting). Deviation: the release keeps ⌊K / #pivots⌋ per pivot, so slightly
// fewer than K tokens; here the remainder goes to the first pivots and exactly K are kept.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/errors.h"
#include "prune/scorers/scorers.h"

namespace vispco {

std::vector<int64_t> dart_select(const at::Tensor& visual_norms, const at::Tensor& text_norms,
                                 const at::Tensor& visual_hidden, const at::Tensor& text_hidden, int64_t k,
                                 int64_t n_image_pivots, int64_t n_text_pivots) {
  const int64_t N = visual_norms.size(0), M = text_norms.size(0);
  TORCH_CHECK(k >= 1 && k <= N, "dart_select: k must be in [1, ", N, "], got ", k);
  const int64_t n_img = std::min(n_image_pivots, N), n_txt = std::min(n_text_pivots, M);
  auto img_order = std::get<1>(visual_norms.to(at::kFloat).cpu().sort(0, /*descending=*/true));
  if (k <= n_img) {
    auto top = img_order.narrow(0, 0, k);
    return std::vector<int64_t>(top.data_ptr<int64_t>(), top.data_ptr<int64_t>() + k);
  }
  auto txt_order = std::get<1>(text_norms.to(at::kFloat).cpu().sort(0, /*descending=*/true));
  auto vh = visual_hidden.to(at::kFloat).cpu();
  auto unit = vh / vh.norm(2, -1, true).clamp_min(1e-12);  // [N, D]
  auto th = text_hidden.to(at::kFloat).cpu();
  auto tunit = th / th.norm(2, -1, true).clamp_min(1e-12);

  std::vector<int64_t> kept;
  std::vector<bool> taken(N, false);
  std::vector<at::Tensor> pivots;  // unit vectors, image pivots then text pivots
  for (int64_t i = 0; i < n_img; ++i) {
    const int64_t j = img_order[i].item<int64_t>();
    kept.push_back(j);
    taken[j] = true;
    pivots.push_back(unit[j]);
  }
  for (int64_t i = 0; i < n_txt; ++i) pivots.push_back(tunit[txt_order[i].item<int64_t>()]);
  TORCH_CHECK(!pivots.empty(), "dart_select: no pivot (pivots and text_pivots are both 0)");
  const int64_t P = static_cast<int64_t>(pivots.size()), rest = k - n_img;
  for (int64_t p = 0; p < P; ++p) {
    const int64_t quota = rest / P + (p < rest % P ? 1 : 0);
    if (quota == 0) continue;
    auto sim = at::mv(unit, pivots[p]);  // [N] cosine to the pivot
    auto acc = sim.accessor<float, 1>();
    std::vector<int64_t> cand;
    for (int64_t i = 0; i < N; ++i)
      if (!taken[i]) cand.push_back(i);
    // Least similar first; ties by lower index.
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) { return acc[a] < acc[b]; });
    for (int64_t i = 0; i < quota; ++i) {
      kept.push_back(cand[i]);
      taken[cand[i]] = true;
    }
  }
  return kept;
}

namespace {

class DartScorer : public Scorer {
 public:
  HookPoint hook_point() const override { return HookPoint::kInLlm; }
  ScorerNeeds needs() const override { return {.keys = true}; }
  std::vector<std::string> option_names() const override { return {"pivots", "text_pivots", "pivot"}; }

  Selection select(const ScoreInput& in) const override {
    const auto& st = *in.stage;
    const int64_t B = in.visual_pos.size(0), N = in.visual_pos.size(1), K = st.keep;
    const int64_t n_img = stage_int_option(st, "pivots", 4, 0, 1 << 20);
    const int64_t n_txt = stage_int_option(st, "text_pivots", 4, 0, 1 << 20);
    const bool by_hidden = pivot_signal(st) == "hidden";
    const auto& h = in.state->hidden;
    // Per-token pivot signal [B, T]: L1 norm of the keys over all kv heads, or L2 norm of the hidden state.
    at::Tensor norms;
    if (by_hidden) {
      norms = h.to(at::kFloat).norm(2, -1);
    } else {
      if (!in.keys.defined()) throw InvalidArgument("dart needs layer ℓ−1's keys (none were recorded)");
      norms = in.keys.to(at::kFloat).abs().sum(-1).sum(1);  // [B, H_kv, T, D_h] → [B, T]
    }
    auto instr = instruction_mask(*in.state);
    Selection s;
    s.keep = at::empty({B, K}, at::kLong);
    s.scores = at::zeros({B, N}, at::kFloat);
    for (int64_t b = 0; b < B; ++b) {
      auto vpos = in.visual_pos[b];
      auto tpos = at::nonzero(instr[b]).squeeze(1);
      auto hb = h[b];
      auto pick = dart_select(norms[b].index_select(0, vpos), norms[b].index_select(0, tpos),
                              hb.index_select(0, vpos), hb.index_select(0, tpos), K, n_img, n_txt);
      for (int64_t i = 0; i < K; ++i) {
        s.keep[b][i] = pick[i];
        s.scores[b][pick[i]] = float(K - i);  // pivots, then each pivot's picks (heat-maps)
      }
    }
    s.keep = s.keep.to(in.visual_pos.device());
    s.scores = s.scores.to(in.visual_pos.device());
    return s;
  }

 protected:
  static std::string pivot_signal(const PruneStage& st) {
    const auto it = st.options.find("pivot");
    return it == st.options.end() ? "key" : it->second;
  }
  void check_extra(const PruneStage& st, const ModelShape&) const override {
    const int64_t n_img = stage_int_option(st, "pivots", 4, 0, 1 << 20);
    const int64_t n_txt = stage_int_option(st, "text_pivots", 4, 0, 1 << 20);
    if (n_img + n_txt == 0) throw InvalidArgument("plan stage dart: pivots + text_pivots must be ≥ 1");
    const auto sig = pivot_signal(st);
    if (sig != "key" && sig != "hidden")
      throw InvalidArgument("plan stage dart: pivot must be key or hidden (got '" + sig + "')");
  }
};

}  // namespace

std::unique_ptr<Scorer> make_dart_scorer() { return std::make_unique<DartScorer>(); }

}  // namespace vispco
