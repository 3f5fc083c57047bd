// The HR training recipe (train/hr/hr_recipe.h): the shipped configs/hr/ recipes load and round-trip, and a
// stage field the HR trainer does not implement is refused rather than silently ignored.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "test_paths.h"
#include "train/hr/hr_recipe.h"

namespace vispco::train {
namespace {

TEST(HrRecipe, ShippedRecipesLoadAndRoundTrip) {
  const auto dir = std::filesystem::path(::vispco::testing::source_dir()) / "configs" / "hr";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().filename().string());
    HrRecipe r;
    ASSERT_NO_THROW(r = load_hr_recipe(entry.path().string()));
    EXPECT_EQ(hr_recipe_from_json(to_json(r)), r);
    ++n;
  }
  EXPECT_GE(n, 1);
}

TEST(HrRecipe, RefusesFieldsTheHrTrainerDoesNotImplement) {
  auto j = to_json(HrRecipe{});
  j["decoder"]["grounding"] = 0.5;
  EXPECT_THROW(hr_recipe_from_json(j), InvalidArgument);
  j = to_json(HrRecipe{});
  j["decoder"]["glyph_weight"] = 2;  // a tower-only field
  EXPECT_THROW(hr_recipe_from_json(j), InvalidArgument);
  j = to_json(HrRecipe{});
  j["tower"]["glyph_weight"] = 2;
  EXPECT_EQ(hr_recipe_from_json(j).tower.glyph_weight, 2);
  j["turns"] = 0;
  EXPECT_THROW(hr_recipe_from_json(j), InvalidArgument);
  j = to_json(HrRecipe{});
  j["decoder"]["answer_grounding"] = 0.5;  // the decoder's answer-row attention loss
  EXPECT_EQ(hr_recipe_from_json(j).decoder.answer_grounding, 0.5);
  j["tower"]["answer_grounding"] = 0.5;  // a decoder-only field
  EXPECT_THROW(hr_recipe_from_json(j), InvalidArgument);
  j = to_json(HrRecipe{});
  j["tower"]["stepz"] = 3;
  EXPECT_ANY_THROW(hr_recipe_from_json(j));
}

}  // namespace
}  // namespace vispco::train
