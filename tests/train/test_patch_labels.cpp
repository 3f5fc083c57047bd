// Patch labels of a scene (train/patch_labels.h): object footprints, per-object counts and glyph indices,
// glyph patches of a string and patch positions.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "train/grounding.h"
#include "train/grounding_fixtures.h"
#include "train/patch_labels.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;
using namespace testing_grounding;

TEST(ObjectPatches, FollowTheFootprintRuleWithLaterObjectsOnTop) {
  // Grid 24, cell 14 px, patch centres at 7 + 14k. Hand-derived: a covers rows/cols 2–3 → {50, 51, 74, 75};
  // b covers (row 2, col 3) = 51 and (row 2, col 4) = 52 and holds its own centre (row 2, col 4).
  const auto s = two_objects();
  EXPECT_EQ(object_patches(s, 0, 24), (std::vector<int64_t>{50, 74, 75}));  // 51 is under b
  EXPECT_EQ(object_patches(s, 1, 24), (std::vector<int64_t>{51, 52}));
  EXPECT_THROW(object_patches(s, 2, 24), InvalidArgument);
  // Agrees with patch_labels' centre column: each object's centre patch is in its list.
  auto lab = patch_labels(s, 24);
  EXPECT_EQ(lab[75][3].item<int64_t>(), 1);
  EXPECT_EQ(lab[52][3].item<int64_t>(), 1);
}

TEST(PatchExtraLabels, CountEachObjectsColourAndShapeAndNumberTheGlyphs) {
  Scene s = two_objects();  // object patches: 0 → {50, 74, 75}, 1 → {51, 52}
  s.objects[0].colour = Colour::kRed, s.objects[0].shape = Shape::kStar;
  s.objects[1].colour = Colour::kRed, s.objects[1].shape = Shape::kCross;
  SceneObject c;  // a third object far away: blue star, small, centre (300, 300) → row 21, col 21
  c.x = 300, c.y = 300, c.radius = 14, c.colour = Colour::kBlue, c.shape = Shape::kStar;
  s.objects.push_back(c);
  SceneText t;  // shares of 14 px; patch centres at 7 + 14k → columns 11, 12, 13 of row 10
  t.text = "K7Q", t.x = 154, t.y = 140, t.w = 42, t.h = 14;
  s.texts = {t};
  const auto lab = patch_extra_labels(s, 24);
  ASSERT_EQ(lab.sizes(), (at::IntArrayRef{576, 3}));
  const auto at = [&](int64_t p, int64_t col) { return lab[p][col].item<int64_t>(); };
  for (int64_t p : {50, 74, 75, 51, 52}) EXPECT_EQ(at(p, 0), 2) << p;  // two red objects
  for (int64_t p : {50, 74, 75}) EXPECT_EQ(at(p, 1), 2) << p;          // two stars
  for (int64_t p : {51, 52}) EXPECT_EQ(at(p, 1), 1) << p;              // one cross
  EXPECT_EQ(at(21 * 24 + 21, 0), 1);                                   // one blue object
  EXPECT_EQ(at(21 * 24 + 21, 1), 2);
  EXPECT_EQ(at(240 + 11, 2), 1);
  EXPECT_EQ(at(240 + 12, 2), 2);
  EXPECT_EQ(at(240 + 13, 2), 3);
  // Everything else is 0: 6 object patches (5 + the third's centre) × 2 counts + 3 glyph patches.
  EXPECT_EQ((lab > 0).sum().item<int64_t>(), 6 * 2 + 3);
}

TEST(GlyphPatches, SplitTheStringsBoxEvenlyAmongItsCharacters) {
  Scene s;
  SceneText t;
  t.text = "AB3";
  t.x = 14, t.y = 28, t.w = 42,
  t.h = 14;  // shares of 14 px; patch centres at 7 + 14k → columns 1, 2, 3, row 2
  SceneText narrow;
  narrow.text = "CD";
  narrow.x = 14, narrow.y = 28, narrow.w = 6, narrow.h = 14;  // 3-px shares hold no patch centre
  s.texts = {t, narrow};
  EXPECT_EQ(glyph_patches(s, 0, 24), (std::vector<std::vector<int64_t>>{{49}, {50}, {51}}));
  // The patch under each share's centre (x 15.5 and 18.5 → column 1; y 35 → row 2).
  EXPECT_EQ(glyph_patches(s, 1, 24), (std::vector<std::vector<int64_t>>{{49}, {49}}));
  EXPECT_THROW(glyph_patches(s, 2, 24), InvalidArgument);
  // Text questions get them only when asked, for the string whose text is the answer.
  const QaPair q{"text", "What does the text say?", "AB3", {}};
  EXPECT_EQ(answer_grounding_of(q, s, 24, {.text_glyphs = true}).glyphs, glyph_patches(s, 0, 24));
  EXPECT_TRUE(answer_grounding_of(q, s, 24).empty());
  EXPECT_TRUE(answer_grounding_of({"text", "q", "XY", {}}, s, 24, {.text_glyphs = true}).empty());
}

TEST(PatchPositions, AreColumnThenRowScaledToMinusOneOne) {
  // Grid 3, row-major: patch 5 is row 1, column 2.
  const auto p = patch_positions(3);
  ASSERT_EQ(p.sizes(), (at::IntArrayRef{9, 2}));
  const float want[9][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, 0}, {0, 0}, {1, 0}, {-1, 1}, {0, 1}, {1, 1}};
  for (int i = 0; i < 9; ++i) {
    EXPECT_FLOAT_EQ(p[i][0].item<float>(), want[i][0]) << i;
    EXPECT_FLOAT_EQ(p[i][1].item<float>(), want[i][1]) << i;
  }
  EXPECT_THROW(patch_positions(1), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
