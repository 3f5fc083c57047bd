// The recipes shipped in configs/ (the bundled model's and its candidates') load, validate and round-trip
// through the recipe reader: a renamed or removed recipe field breaks this test, not a training run hours in.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_paths.h"
#include "train/recipe.h"

namespace vispco::train {
namespace {

TEST(ShippedRecipes, LoadValidateAndKeepIssue16sFixedShape) {
  const auto dir = std::filesystem::path(::vispco::testing::source_dir()) / "configs";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    TrainRecipe r;
    ASSERT_NO_THROW(r = load_recipe(entry.path().string()));
    EXPECT_EQ(recipe_from_json(to_json(r)), r);
    // Issue 16's fixed shape: LLaVA-1.5's 336 px at patch 14 (N_v = 576) and at least 8 decoder layers.
    EXPECT_EQ(r.model.vision.image_size, 336);
    EXPECT_EQ(r.model.vision.patch_size, 14);
    EXPECT_GE(r.model.text.num_hidden_layers, 8);
    ++n;
  }
  EXPECT_GE(n, 2);  // the bundled model's recipe and at least one other
  EXPECT_TRUE(std::filesystem::exists(dir / "synthvqa-small.json"));
}

}  // namespace
}  // namespace vispco::train
