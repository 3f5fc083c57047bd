// The AnyRes views of a SynthVQA-HR image and their per-patch labels (train/hr/hr_views.h), against view
// geometry and label positions worked out by hand for one 672×336 scene.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "train/hr/hr_views.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

// 672×336: one tiny green star at (400, 100), radius 7, and the string "K7" (font 9 px) in the box
// (350, 20, 30 × 12) — both in the right tile.
Scene wide_scene() {
  Scene s;
  s.width = 672;
  s.height = 336;
  SceneObject o;
  o.shape = Shape::kStar;
  o.colour = Colour::kGreen;
  o.size = SizeClass::kTiny;
  o.x = 400;
  o.y = 100;
  o.radius = 7;
  s.objects.push_back(o);
  s.texts.push_back({"K7", "black", 9, 350, 20, 30, 12});
  return s;
}

TEST(HrViews, BaseViewThenTilesRowMajor) {
  const auto v = hr_views(wide_scene(), 336);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], (HrView{0, 0, 2, 1}));  // the whole canvas squashed to 336²: 2 canvas px per view px in x
  EXPECT_EQ(v[1], (HrView{0, 0, 1, 1}));
  EXPECT_EQ(v[2], (HrView{336, 0, 1, 1}));
  Scene tall = wide_scene();
  tall.width = 336;
  tall.height = 1008;
  const auto t = hr_views(tall, 336);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[3], (HrView{0, 672, 1, 1}));
  Scene odd = wide_scene();
  odd.width = 500;
  EXPECT_THROW(hr_views(odd, 336), InvalidArgument);
}

TEST(HrViews, LabelsATinyObjectAndSmallTextWhereTheTileShowsThem) {
  const auto s = wide_scene();
  const auto v = hr_views(s, 336);
  const auto tile = hr_patch_labels(s, v[2], 24, 336);
  // Right tile: the star's centre (400 − 336, 100) = (64, 100) lies in patch row 7, column 4; that patch's
  // centre is canvas (399, 105), 5.10 px from the star's centre, within 0.75 · 7 = 5.25.
  const int64_t p = 7 * 24 + 4;
  EXPECT_EQ(tile[p][0].item<int64_t>(), static_cast<int64_t>(Colour::kGreen) + 1);
  EXPECT_EQ(tile[p][1].item<int64_t>(), static_cast<int64_t>(Shape::kStar) + 1);
  EXPECT_EQ(tile[p][2].item<int64_t>(), 3);  // size classes none, small, large, tiny
  EXPECT_EQ(tile[p][3].item<int64_t>(), 1);
  EXPECT_EQ(tile.select(1, 0).gt(0).sum().item<int64_t>(), 1);  // no other patch centre is that close
  // "K7": patch row 1 (centre y 21) spans the box's rows; columns 1 (x 357) and 2 (x 371) are inside the
  // box; 357 falls in the first half ("K"), 371 in the second ("7"). Ink black is ink_table()[0].
  EXPECT_EQ(tile[24 + 1][4].item<int64_t>(), 1 + 14);  // 'K' is kTextAlphabet[14]
  EXPECT_EQ(tile[24 + 2][4].item<int64_t>(), 1 + 5);   // '7' is kTextAlphabet[5]
  EXPECT_EQ(tile[24 + 1][5].item<int64_t>(), 1);
  EXPECT_EQ(tile.select(1, 4).gt(0).sum().item<int64_t>(), 2);
  // The left tile shows nothing.
  EXPECT_EQ(hr_patch_labels(s, v[1], 24, 336).abs().sum().item<int64_t>(), 0);
  // Base view: the centre (400 / 2, 100) = (200, 100) lies in row 7, column 14; no patch centre is within
  // 5.25 px (the nearest, (406, 105), is 7.8 px away); the text's cap height 9 / 2 = 4.5 px is below
  // kMinLabelledCapPx, so no character labels.
  const auto base = hr_patch_labels(s, v[0], 24, 336);
  EXPECT_EQ(base[7 * 24 + 14][3].item<int64_t>(), 1);
  EXPECT_EQ(base.select(1, 0).gt(0).sum().item<int64_t>(), 0);
  EXPECT_EQ(base.select(1, 4).gt(0).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace vispco::train
