// Answer grounding on LLaVA-NeXT's packed visual tokens (train/hr/hr_grounding.h), against token indices
// worked out by hand for a 672×336 scene under llava-v1.6's geometry: best resolution 672×336 (no padding, no
// unpadding), 2 tiles of n = 24; the sequence is the 576 base tokens, then 24 rows of 48 tile features each
// followed by image_newline (49 tokens a row), so tile j's patch (a, b) is token 576 + 49·a + 24·j + b.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/llava_next/presets.h"
#include "train/hr/hr_grounding.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

SceneObject object(Shape shape, SizeClass size, int x, int y, int radius) {
  SceneObject o;
  o.shape = shape;
  o.size = size;
  o.x = x;
  o.y = y;
  o.radius = radius;
  return o;
}

// A tiny star at (400, 100), radius 7, in the right tile, and a large circle at (175, 175), radius 20, in the
// left tile.
Scene scene() {
  Scene s;
  s.width = 672;
  s.height = 336;
  s.objects.push_back(object(Shape::kStar, SizeClass::kTiny, 400, 100, 7));
  s.objects.push_back(object(Shape::kCircle, SizeClass::kLarge, 175, 175, 20));
  return s;
}

AnyresGeometry geometry() {
  return anyres_geometry(336, 672, find_llava_next_preset("llava-v1.6-vicuna-7b").config);
}

TEST(HrGrounding, FeatureRowsMapToPackedTokens) {
  const auto map = hr_feature_to_token(geometry());
  ASSERT_EQ(map.size(), 3u * 576u);
  EXPECT_EQ(map[0], 0);
  EXPECT_EQ(map[575], 575);
  EXPECT_EQ(map[576], 576);                  // tile 0 (0, 0)
  EXPECT_EQ(map[576 + 24], 625);             // tile 0 (1, 0): after row 0's 48 features and its newline
  EXPECT_EQ(map[1152], 600);                 // tile 1 (0, 0): row 0, column 24
  EXPECT_EQ(map[1727], 576 + 49 * 23 + 47);  // tile 1 (23, 23)
}

TEST(HrGrounding, TinyObjectIsItsTileCentrePatch) {
  // Right tile: the star's centre (64, 100) in tile pixels is patch (7, 4), whose centre, canvas (399, 105),
  // is 5.10 px away, within 0.75 · 7 = 5.25: token 576 + 49·7 + 24 + 4 = 947. Base view (2 canvas px per view
  // px in x): patch centres ((c + ½)·28, (r + ½)·14); the nearest, (406, 105) and (378, 105), are 7.8
  // and 22.6 px away: no base token.
  const auto s = scene();
  EXPECT_EQ(hr_object_tokens(s, s.objects[0], geometry(), 336), (std::vector<int64_t>{947}));
  EXPECT_EQ(hr_object_tokens(s, s.objects[0], geometry(), 336, true), (std::vector<int64_t>{947}));
}

TEST(HrGrounding, LargeObjectCoversBaseAndTilePatches) {
  // Left tile: (175, 175) is patch (12, 12)'s centre; within 0.75 · 20 = 15 px lie its 4 neighbours at 14 px
  // (the diagonals are 19.8 px away): tokens 576 + 49·r + c for (11, 12), (12, 11), (12, 12), (12, 13),
  // (13, 12) = 1127, 1175, 1176, 1177, 1225. Base view: patch (12, 6), centre (182, 175), 7 px away → token
  // 12·24 + 6 = 294; (11, 6) and (13, 6) are √(49 + 196) = 15.7 px away, column 5 (x 154) 21 px.
  const auto s = scene();
  EXPECT_EQ(hr_object_tokens(s, s.objects[1], geometry(), 336),
            (std::vector<int64_t>{294, 1127, 1175, 1176, 1177, 1225}));
  EXPECT_EQ(hr_object_tokens(s, s.objects[1], geometry(), 336, true), (std::vector<int64_t>{1176}));
}

TEST(HrGrounding, GlyphsAreTheTilePatchesInTheirSliceOfTheTextBox) {
  // "K7" in the box (350, 20, 30 × 12): character 0 spans x ∈ [350, 365), character 1 [365, 380), y ∈ [20,
  // 32). Right tile patch centres: x = 336 + 7 + 14·c (343, 357, 371), y = 7 + 14·r (row 1: 21). Character 0
  // → patch (1, 1) (x 357), token 576 + 49 + 24 + 1 = 650; character 1 → (1, 2) (x 371), token 651. The slice
  // centres (357.5, 26) and (372.5, 26) fall in the same patches; the left tile and the base view add
  // nothing.
  Scene s = scene();
  s.texts.push_back({"K7", "black", 9, 350, 20, 30, 12});
  const auto g = geometry();
  EXPECT_EQ(hr_glyph_tokens(s, s.texts[0], 0, g, 336), (std::vector<int64_t>{650}));
  EXPECT_EQ(hr_glyph_tokens(s, s.texts[0], 1, g, 336), (std::vector<int64_t>{651}));
  EXPECT_THROW(hr_glyph_tokens(s, s.texts[0], 2, g, 336), InvalidArgument);
  // A glyph narrower than a patch with no patch centre in its slice still gets the patch holding its centre:
  // "ABC" in (350, 20, 12 × 12), 4 px a character: slice 0 is [350, 354), between the centres 343 and 357;
  // its centre (352, 26) lies in patch (1, 1) (x ∈ [350, 364)).
  s.texts.push_back({"ABC", "white", 9, 350, 20, 12, 12});
  EXPECT_EQ(hr_glyph_tokens(s, s.texts[1], 0, g, 336), (std::vector<int64_t>{650}));
  // A text question grounds the glyphs of the text whose string is the answer, of the asked ink.
  const auto by_ink = hr_turn_grounding({"text", "What does the white text say?", "ABC", {}}, s, g, 336);
  ASSERT_EQ(by_ink.glyphs.size(), 3u);
  EXPECT_TRUE(by_ink.objects.empty());
  const auto first = hr_turn_grounding({"text", "What does the black text say?", "K7", {}}, s, g, 336);
  EXPECT_EQ(first.glyphs, (std::vector<std::vector<int64_t>>{{650}, {651}}));
}

TEST(HrGrounding, TurnTargetsByFamily) {
  const auto s = scene();
  const auto g = geometry();
  const auto colour =
      hr_turn_grounding({"tiny_color", "What color is the tiny star?", "red", {0}}, s, g, 336);
  EXPECT_EQ(colour.objects, (std::vector<std::vector<int64_t>>{{947}}));
  EXPECT_FALSE(colour.sink);
  const auto count = hr_turn_grounding({"large_count", "How many …?", "2", {0, 1}}, s, g, 336);
  EXPECT_EQ(count.objects, (std::vector<std::vector<int64_t>>{{947}, {1176}}));  // centre tokens only
  EXPECT_TRUE(count.sink);
  EXPECT_TRUE(
      hr_turn_grounding({"text", "What does the text say?", "K7", {}}, s, g, 336).empty());  // no text
  EXPECT_TRUE(hr_turn_grounding({"spatial", "?", "left", {0, 1}}, s, g, 336).empty());
  EXPECT_THROW(hr_turn_grounding({"tiny_color", "?", "red", {2}}, s, g, 336), InvalidArgument);
  Scene tall = s;
  tall.height = 672;  // two tile rows: not this geometry's tiles
  EXPECT_THROW(hr_object_tokens(tall, s.objects[0], g, 336), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
