// DART (prune/scorers/dart.cpp) against independent computations: the kept set on a hand-made key/hidden
// matrix worked out by hand, and on the tiny model against a brute-force recomputation from the keys of
// layer ℓ−1 (recomputed with the reference ops) and the hidden states entering layer ℓ.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

using testing::cosine;

at::Tensor rows(std::vector<std::vector<float>> v) {
  auto t = at::empty({(int64_t)v.size(), (int64_t)v[0].size()}, at::kFloat);
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = 0; j < v[i].size(); ++j) t[i][j] = v[i][j];
  return t;
}

// Six visual tokens, two instruction tokens, in 2-D. Key L1 norms make visual token 0 the image pivot and
// text token 1 the text pivot. Token 1 duplicates the pivot (cos ≈ 0.995), token 3 points away from it
// (cos −1); token 5 points away from the text pivot (0, 1) (cos −1).
TEST(Dart, KeptSetOnAHandMadeKeyMatrix) {
  auto keys_v =
      rows({{3, 2}, {0.5, 0.5}, {0.25, 0.5}, {0.5, 0}, {0, 0.5}, {0.5, 0.25}});  // L1: 5, 1, .75, .5, .5, .75
  auto keys_t = rows({{0.25, 0.25}, {2, 1}});                                    // L1: .5, 3
  auto norms_v = keys_v.abs().sum(1), norms_t = keys_t.abs().sum(1);
  auto hid_v = rows({{1, 0}, {1, 0.1f}, {0, 1}, {-1, 0}, {0.9f, 0.1f}, {0, -1}});
  auto hid_t = rows({{1, 1}, {0, 1}});
  // K = 3, one image and one text pivot: keep pivot 0; 2 slots left, one per pivot.
  // Pivot v0 = (1,0): least similar of {1..5} is v3 (cos −1). Pivot t1 = (0,1): of {1,2,4,5}, v5 (cos −1).
  auto got = dart_select(norms_v, norms_t, hid_v, hid_t, 3, 1, 1);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 3, 5}));
  // K = 4: the image pivot takes the extra slot: v3 and then (of {1,2,4,5}) v2 (cos 0 beats 0.11, 0.0995…:
  // the least similar to (1,0) after v3 is v2 or v5, both cos 0 → the lower index, v2); then t1 takes v5.
  got = dart_select(norms_v, norms_t, hid_v, hid_t, 4, 1, 1);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 3, 2, 5}));
  // K = 1: only the image pivot.
  EXPECT_EQ(dart_select(norms_v, norms_t, hid_v, hid_t, 1, 1, 1), (std::vector<int64_t>{0}));
  // No text pivot, two image pivots (L1 norms 5 and 1: v0, v1): both kept; the one remaining slot goes to
  // pivot v0, whose least similar token is v3.
  EXPECT_EQ(dart_select(norms_v, norms_t, hid_v, hid_t, 3, 2, 0), (std::vector<int64_t>{0, 1, 3}));
}

TEST(Dart, TinyModelKeptSetEqualsBruteForceFromLayerKeys) {
  auto m = testing::load_tiny();
  const int64_t layer = 2, K = 6;
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  VlmRequest req{testing::test_pixels(56, 21), m.prompt_ids("Is the small cube left of the red sphere?")};
  testing::RecordHook rec(layer, /*keys=*/true);
  generate(m, {req}, gc, &rec);
  ASSERT_TRUE(rec.keys.defined());
  PlanHook dart(parse_plan("dart:layer=2,keep=6,pivots=2,text_pivots=2", 16), m.shape());
  generate(m, {req}, gc, &dart);
  ASSERT_EQ(dart.traces().size(), 1u);

  // Keys of layer 1 from the tokens entering it, by hand; compare with what the hook was handed.
  testing::RecordHook before(layer - 1);
  generate(m, {req}, gc, &before);
  auto keys = testing::keys_by_hand(m, before.seen, layer - 1);  // [T, H_kv·D_h]
  auto handed = rec.keys[0].permute({1, 0, 2}).reshape({keys.size(0), -1});
  EXPECT_LT(testing::max_diff(keys, handed), 1e-4);

  // Brute force: L1 norms, 2 image + 2 text pivots, then per pivot its least similar tokens.
  const auto vis = testing::visual_tokens(rec.seen), txt = testing::instruction_tokens(rec.seen);
  auto l1 = [&](int64_t t) { return keys[t].abs().sum().item<double>(); };
  auto by_norm = [&](std::vector<int64_t> v) {
    std::stable_sort(v.begin(), v.end(), [&](int64_t a, int64_t b) { return l1(a) > l1(b); });
    return v;
  };
  auto vs = by_norm(vis), ts = by_norm(txt);
  std::vector<int64_t> pivots = {vs[0], vs[1], ts[0], ts[1]};
  std::set<int64_t> kept = {vs[0], vs[1]};
  const int64_t rest = K - 2;
  for (int p = 0; p < 4; ++p) {
    const int64_t quota = rest / 4 + (p < rest % 4 ? 1 : 0);
    std::vector<std::pair<double, int64_t>> cand;
    for (auto t : vis)
      if (!kept.count(t)) cand.push_back({cosine(rec.seen.hidden[0][t], rec.seen.hidden[0][pivots[p]]), t});
    std::stable_sort(cand.begin(), cand.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (int64_t i = 0; i < quota; ++i) kept.insert(cand[i].second);
  }
  std::set<int64_t> expect;
  for (auto t : kept) expect.insert(rec.seen.grid_index[0][t].item<int64_t>());
  EXPECT_EQ(testing::kept_patches(dart.traces()[0].kept[0]), expect);
}

TEST(Dart, HiddenNormPivotsAndBadOptions) {
  auto m = testing::load_tiny();
  GenerationConfig gc;
  gc.max_new_tokens = 2;
  VlmRequest req{testing::test_pixels(56, 22), m.prompt_ids("What color is the cube?")};
  PlanHook dart(parse_plan("dart:layer=1,keep=4,pivot=hidden", 16), m.shape());
  auto out = generate(m, {req}, gc, &dart);
  EXPECT_EQ(out.stats.n_visual_kept, 4);
  for (const char* bad : {"dart:layer=1,keep=4,pivot=value", "dart:layer=1,keep=4,pivots=0,text_pivots=0",
                          "dart:layer=1,keep=4,pivots=x", "dart:layer=0,keep=4", "dart:layer=1,keep=4,foo=1"})
    EXPECT_THROW(PlanHook(parse_plan(bad, 16), m.shape()), InvalidArgument) << bad;
}

}  // namespace
}  // namespace vispco
