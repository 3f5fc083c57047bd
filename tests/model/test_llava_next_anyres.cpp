// LLaVA-NeXT's AnyRes geometry (model/llava_next/anyres.h), config and size slice, on hand-worked cases:
// every expected value below is worked out in its comment from transformers v4.52's formulas
// (select_best_resolution, get_patch_output_size, unpad_image, pack_image_features), not by calling vispco.
// Sizes are written width × height; pinpoints (height, width) as transformers lists them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/config.h"
#include "model/llava_next/image_processor.h"
#include "model/llava_next/llava_next_shape.h"
#include "model/llava_next/pack.h"
#include "model/llava_next/presets.h"

namespace vispco {
namespace {

// llava-v1.6: 336-px tiles of 14-px patches (n = 24), pinpoints (h, w) 336×672, 672×336, 672×672,
// 1008×336, 336×1008.
LlavaNextConfig v16() { return find_llava_next_preset("llava-v1.6-vicuna-7b").config; }
// tiny-next: 56-px tiles of 14-px patches (n = 4), pinpoints (h, w) 56×112, 112×56, 112×112.
LlavaNextConfig tiny() { return find_llava_next_preset("tiny-next").config; }

TEST(LlavaNextAnyres, BestResolutionOnHandWorkedCases) {
  const auto pins = v16().image_grid_pinpoints;
  // 1000×700 (h = 700, w = 1000). s = min(W/1000, H/700) and effective = ⌊1000 s⌋·⌊700 s⌋:
  //   336×672: s = 0.48 → 480·336 = 161280;  672×336: s = 0.336 → 336·235 = 78960;
  //   672×672: s = 0.672 → 672·470 = 315840 (the largest); 1008×336: 78960; 336×1008: 161280.
  EXPECT_EQ(select_best_resolution(700, 1000, pins), (Resolution{672, 672}));
  // 500×1000: 672×336, 672×672 and 1008×336 all reach s = 0.672 → 336·672 = 225792; waste 0, 225792 and
  // 112896: 672×336 wins.
  EXPECT_EQ(select_best_resolution(1000, 500, pins), (Resolution{672, 336}));
  // 55×176 (9680 px): every pinpoint scales it up, so every effective is capped at 9680; the waste ties
  // between 336×672 and 672×336 (225792 − 9680 each) and the first listed wins.
  EXPECT_EQ(select_best_resolution(176, 55, pins), (Resolution{336, 672}));
  // tiny, 60×50 (3000 px): 56×112: s = min(112/60, 56/50) = 1.12 → 67·56 = 3752, capped 3000;
  // 112×56: s = 0.933 → 56·46 = 2576; 112×112: capped 3000 but wastes 12544 − 3000 > 6272 − 3000.
  EXPECT_EQ(select_best_resolution(50, 60, tiny().image_grid_pinpoints), (Resolution{56, 112}));
  // A square 56×56 under 56×112 and 112×56 ties on effective (3136) and waste (3136): the first listed.
  EXPECT_EQ(select_best_resolution(56, 56, {{56, 112}, {112, 56}}), (Resolution{56, 112}));
  // 1×1000: ⌊1·s⌋ = 0 at every tiny pinpoint, so every effective is 0 (ties with the initial 0): the least
  // waste wins, 56×112 and 112×56 tie at 6272, the first listed. Unpadding its 4×8 grid: new_w =
  // int(1·4/1000) = 0, p = 4 → no column survives, and each of the 4 rows is only its newline: N = 16 + 4.
  EXPECT_EQ(select_best_resolution(1000, 1, tiny().image_grid_pinpoints), (Resolution{56, 112}));
  EXPECT_EQ(anyres_geometry(1000, 1, tiny()).layout(), (VisualLayout{20, 4, 1}));
  EXPECT_THROW(select_best_resolution(10, 10, {}), InvalidArgument);
  EXPECT_THROW(select_best_resolution(0, 10, pins), InvalidArgument);
}

TEST(LlavaNextAnyres, ResizeKeepsTheAspectAndCentresOnTheCanvas) {
  // 1000×700 onto 672×672: scale_w = 0.672 < scale_h = 0.96 → width 672, height ⌈700·0.672⌉ = ⌈470.4⌉ = 471;
  // 672 − 471 = 201 rows of padding: 100 above, 101 below.
  EXPECT_EQ(anyres_canvas(700, 1000, {672, 672}), (AnyresCanvas{{672, 672}, {471, 672}, 100, 0}));
  // tiny 60×50 onto 56×112: scale_h = 1.12 ≤ scale_w = 1.87 → height 56, width ⌈60·1.12⌉ = ⌈67.2⌉ = 68;
  // 112 − 68 = 44 → 22 columns each side.
  EXPECT_EQ(anyres_canvas(50, 60, {56, 112}), (AnyresCanvas{{56, 112}, {56, 68}, 0, 22}));
  // 112×56 onto 56×112: both scales 1 → no resize, no padding.
  EXPECT_EQ(anyres_canvas(56, 112, {56, 112}), (AnyresCanvas{{56, 112}, {56, 112}, 0, 0}));
}

TEST(LlavaNextAnyres, UnpaddingOnHandWorkedCases) {
  // 1000×700 on a 48×48 grid: 1000/700 > 1 → rows: new_h = int(700·48/1000) = int(33.6) = 33,
  // p = (48 − 33) // 2 = 7 → rows [7, 41) (34 = new_h + 1: the odd difference stays), every column.
  EXPECT_EQ(unpad_extent(700, 1000, 48, 48), (UnpadExtent{7, 34, 0, 48}));
  // 60×50 on 4×8: 1.2 < 2 → columns: new_w = int(60·4/50) = int(4.8) = 4, p = (8 − 4) // 2 = 2 → [2, 6).
  EXPECT_EQ(unpad_extent(50, 60, 4, 8), (UnpadExtent{0, 4, 2, 4}));
  // 15×100 on 8×4: 0.15 < 0.5 → new_w = int(15·8/100) = int(1.2) = 1, p = (4 − 1) // 2 = 1 → [1, 3).
  EXPECT_EQ(unpad_extent(100, 15, 8, 4), (UnpadExtent{0, 8, 1, 2}));
  // 500×1000 on 48×24: equal aspects (0.5) → the column branch: new_w = 500·48/1000 = 24, p = 0.
  EXPECT_EQ(unpad_extent(1000, 500, 48, 24), (UnpadExtent{0, 48, 0, 24}));
  // round(·, 7): 49·(8/392) is 0.9999999999999999 in doubles (exactly 1): new_w = 1, p = (4 − 1) // 2 = 1 →
  // columns [1, 3). Truncating without the rounding would give new_w = 0 and keep no column at all.
  EXPECT_EQ(unpad_extent(392, 49, 8, 4), (UnpadExtent{0, 8, 1, 2}));
}

TEST(LlavaNextAnyres, TilesAndTokensForSeveralAspectRatios) {
  struct Case {
    int64_t w, h;
    LlavaNextConfig cfg;
    int64_t tiles, rows, cols, n;
  };
  const std::vector<Case> cases = {
      // v1.6 (n = 24, 576 base tokens). 1000×700: 672×672 → 2×2 tiles, grid 48×48, rows [7, 41):
      // N = 576 + 34·(48 + 1) = 2242.
      {1000, 700, v16(), 4, 34, 48, 2242},
      // 500×1000: 672×336 → 2×1 tiles, grid 48×24, nothing trimmed: N = 576 + 48·25 = 1776.
      {500, 1000, v16(), 2, 48, 24, 1776},
      // 672×672: 2×2 tiles, nothing trimmed: N = 576 + 48·49 = 2928 (the largest).
      {672, 672, v16(), 4, 48, 48, 2928},
      // 1008×336: 336×1008 → 1×3 tiles, grid 24×72: N = 576 + 24·73 = 2328.
      {1008, 336, v16(), 3, 24, 72, 2328},
      // 336×1008: 1008×336 → 3×1 tiles, grid 72×24: N = 576 + 72·25 = 2376.
      {336, 1008, v16(), 3, 72, 24, 2376},
      // tiny (n = 4, 16 base tokens). 112×56: 56×112 → 1×2 tiles, grid 4×8: N = 16 + 4·9 = 52.
      {112, 56, tiny(), 2, 4, 8, 52},
      // 56×112: 112×56 → 2×1 tiles, grid 8×4: N = 16 + 8·5 = 56.
      {56, 112, tiny(), 2, 8, 4, 56},
      // 100×100: 112×112 (s = 1.12 → 112·112 capped at 10000; the others 56·56 … 5600) → 2×2, grid 8×8:
      // N = 16 + 8·9 = 88.
      {100, 100, tiny(), 4, 8, 8, 88},
      // 60×50: 56×112, grid 4×8, columns [2, 6): N = 16 + 4·5 = 36.
      {60, 50, tiny(), 2, 4, 4, 36},
      // 15×100: 112×56 (effective capped at 1500, least waste), grid 8×4, columns [1, 3): N = 16 + 8·3 = 40.
      {15, 100, tiny(), 2, 8, 2, 40},
  };
  for (const auto& c : cases) {
    const auto g = anyres_geometry(c.h, c.w, c.cfg);
    EXPECT_EQ(g.n_tiles(), c.tiles) << c.w << "×" << c.h;
    EXPECT_EQ(g.unpad.n_rows, c.rows) << c.w << "×" << c.h;
    EXPECT_EQ(g.unpad.n_cols, c.cols) << c.w << "×" << c.h;
    EXPECT_EQ(g.n_tokens(), c.n) << c.w << "×" << c.h;
    EXPECT_EQ(g.layout(), (VisualLayout{c.n, c.rows, c.cols + 1})) << c.w << "×" << c.h;
  }
}

TEST(LlavaNextAnyres, TheShapeStatesTheLargestImage) {
  // v1.6: 672×672 gives 576 + 48·49 = 2928 over a 48 × 49 grid, with 4 tiles (5 pictures in the tower).
  EXPECT_EQ(anyres_largest_layout(v16()), (VisualLayout{2928, 48, 49}));
  EXPECT_EQ(anyres_max_tiles(v16()), 4);
  const auto s = llava_next_shape(v16());
  EXPECT_EQ(s.architecture, "LlavaNextForConditionalGeneration");
  EXPECT_EQ(s.n_visual_tokens, 2928);
  EXPECT_EQ(s.default_layout(), (VisualLayout{2928, 48, 49}));
  EXPECT_EQ(s.image_size, 336);
  // FLOPs of one picture (CLIP-L/336, 23 layers at 577 tokens, D = D_v·… ) counted 5 times.
  const int64_t n2 = 576, dv = 1024, mv = 4096, d = 4096;
  const int64_t layer = 4 * 2 * 577 * dv * dv + 2 * 2 * 577 * 577 * dv + 2 * 2 * 577 * dv * mv;
  EXPECT_EQ(s.flops.vision_layers, 5 * 23 * layer);
  EXPECT_EQ(s.flops.vision_patch_embed, 5 * 2 * n2 * dv * (3 * 14 * 14));
  EXPECT_EQ(s.flops.projector, 5 * 2 * n2 * (dv * d + d * d));
  EXPECT_EQ(s.flops.n_visual_tokens, 2928);
  // tiny: 112×112 → 16 + 8·9 = 88.
  EXPECT_EQ(anyres_largest_layout(tiny()), (VisualLayout{88, 8, 9}));
}

TEST(LlavaNextAnyres, PackOrderOnAHandWorkedImage) {
  // tiny 60×50: base features 0..15; tiles 0 (rows 16..31) and 1 (32..47) side by side on a 4×8 grid; columns
  // [2, 6) kept: x = 2, 3 are tile 0's columns 2, 3 and x = 4, 5 tile 1's columns 0, 1, so grid row y holds
  // 16 + 4y + {2, 3}, 32 + 4y + {0, 1}, then the newline (row 48 = 3·16).
  const auto g = anyres_geometry(50, 60, tiny());
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 16; ++i) want.push_back(i);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t v : {16 + 4 * y + 2, 16 + 4 * y + 3, 32 + 4 * y, 32 + 4 * y + 1, int64_t{48}})
      want.push_back(v);
  EXPECT_TRUE(at::equal(anyres_pack_index(g), at::tensor(want, at::kLong)));
}

// transformers' pack_image_features for one image, written with its tensor operations (view, permute,
// flatten, slice, cat) instead of an index: [1 + T, n², C] → [N_v, C].
at::Tensor pack_like_transformers(const at::Tensor& f, const at::Tensor& newline, const AnyresGeometry& g) {
  const int64_t n = g.grid, C = f.size(2);
  auto x = f.narrow(0, 1, g.n_tiles()).reshape({g.tile_rows, g.tile_cols, n, n, C});
  x = x.permute({4, 0, 2, 1, 3}).flatten(1, 2).flatten(2, 3);  // [C, rows·n, cols·n]
  x = x.narrow(1, g.unpad.row0, g.unpad.n_rows).narrow(2, g.unpad.col0, g.unpad.n_cols);
  x = at::cat({x, newline.view({C, 1, 1}).expand({C, x.size(1), 1})}, 2);
  return at::cat({f[0], x.flatten(1, 2).transpose(0, 1)}, 0);
}

TEST(LlavaNextAnyres, PackingEqualsTransformersTensorOperations) {
  for (const auto& [w, h] :
       std::vector<std::pair<int, int>>{{60, 50}, {15, 100}, {100, 100}, {90, 40}, {41, 97}}) {
    const auto g = anyres_geometry(h, w, tiny());
    const auto f = at::randn({1 + g.n_tiles(), 16, 5}, at::kDouble);
    const auto nl = at::randn({5}, at::kDouble);
    const auto got = pack_image_features(f, nl, g);
    EXPECT_EQ(got.size(0), g.n_tokens());
    EXPECT_TRUE(at::equal(got, pack_like_transformers(f, nl, g))) << w << "×" << h;
  }
  const auto g = anyres_geometry(50, 60, tiny());
  EXPECT_THROW(pack_image_features(at::zeros({2, 16, 5}), at::zeros({5}), g), InvalidArgument);  // 3 needed
}

TEST(LlavaNextAnyres, TheImageSizeSurvivesTheComputeDtype) {
  for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{{700, 1000}, {1, 1}, {65535, 257}, {4097, 333}})
    for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
      const auto slice = image_size_slice(h, w, 56).to(dt);
      EXPECT_EQ(decode_image_size_slice(slice), std::make_pair(h, w)) << h << "×" << w;
    }
  EXPECT_THROW(image_size_slice(65536, 10, 56), InvalidArgument);
  EXPECT_THROW(decode_image_size_slice(at::randn({3, 56, 56})), InvalidArgument);  // LLaVA-1.5 pixels
}

TEST(LlavaNextConfig, ParsesTransformersFieldsAndRoundTrips) {
  // A llava-v1.6-vicuna-like config.json without vision_config: transformers' default tower (CLIP-L/336).
  const nlohmann::json j = {{"model_type", "llava_next"},
                            {"architectures", {"LlavaNextForConditionalGeneration"}},
                            {"image_grid_pinpoints", {{336, 672}, {672, 336}}},
                            {"image_token_index", 32000},
                            {"text_config", {{"model_type", "llama"}, {"num_hidden_layers", 2}}}};
  const auto c = llava_next_config_from_json(j);
  EXPECT_EQ(c.llava.vision.image_size, 336);
  EXPECT_EQ(c.llava.vision.patch_size, 14);
  EXPECT_EQ(c.llava.vision.num_hidden_layers, 24);
  EXPECT_EQ(c.llava.text.num_hidden_layers, 2);
  EXPECT_EQ(c.image_grid_pinpoints, (std::vector<Resolution>{{336, 672}, {672, 336}}));
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(llava_next_config_from_json(llava_next_config_to_json(c)), c);
  EXPECT_EQ(llava_next_config_from_json(llava_next_config_to_json(tiny())), tiny());
  EXPECT_EQ(llava_next_config_from_json({{"model_type", "llava_next"}}).image_grid_pinpoints.size(), 5u);

  auto bad = c;
  bad.image_grid_pinpoints = {{336, 500}};  // not a multiple of 336
  EXPECT_THROW(bad.validate(), ConfigError);
  bad = c;
  bad.llava.vision_feature_select_strategy = "full";
  EXPECT_THROW(bad.validate(), ConfigError);
  EXPECT_THROW(llava_next_config_from_json({{"model_type", "llava"}}), ConfigError);
  EXPECT_THROW(
      llava_next_config_from_json({{"model_type", "llava_next"}, {"image_grid_pinpoints", {336, 672}}}),
      ConfigError);
}

}  // namespace
}  // namespace vispco
