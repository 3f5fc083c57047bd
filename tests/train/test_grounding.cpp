// What the grounding losses read (train/grounding.h, scene_questions.h): the object words of a question, the
// objects each question is about, and the answer grounding of each family.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "train/grounding.h"
#include "train/grounding_fixtures.h"
#include "train/patch_labels.h"
#include "train/scene_questions.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;
using namespace testing_grounding;

TEST(ObjectWordEnds, FindWholeColourAndShapeWordsOnly) {
  testing::TempDir tmp;
  auto tok = question_tokenizer(tmp);
  auto ids = tok.encode("How many stars are there? What color is the star? Is there a red circle?", false);
  auto ends = object_word_ends(tok, ids, 0, ids.size());
  const std::vector<std::string> expected = {"stars", "star", "red", "circle"};
  ASSERT_EQ(ends.size(), expected.size());
  for (size_t k = 0; k < ends.size(); ++k) {
    const auto text = tok.decode(std::vector<int64_t>(ids.begin(), ids.begin() + ends[k] + 1));
    EXPECT_TRUE(text.ends_with(expected[k])) << text;
  }
  auto other = tok.encode("Is the reddish thing starry or circled?", false);
  EXPECT_TRUE(object_word_ends(tok, other, 0, other.size()).empty());
  // A sub-range only sees its own words; the image placeholder id is skipped.
  ids.insert(ids.begin(), 1000);
  EXPECT_EQ(object_word_ends(tok, ids, 0, ids.size()).size(), 4u);
  EXPECT_THROW(object_word_ends(tok, ids, 3, 2), InvalidArgument);
}

TEST(SceneQuestions, NameTheObjectsTheirAnswersDependOn) {
  for (uint64_t i = 0; i < 60; ++i) {
    const auto s = make_sample(21, i);
    for (const auto& q : all_questions(s.scene)) {
      std::vector<SceneObject> objs;
      for (int o : q.objects) objs.push_back(s.scene.objects.at(static_cast<size_t>(o)));
      if (q.family == "color") {
        ASSERT_EQ(objs.size(), 1u) << q.question;
        EXPECT_EQ(info(objs[0].colour).name, q.answer);
      } else if (q.family == "shape") {
        ASSERT_EQ(objs.size(), 1u) << q.question;
        EXPECT_EQ(info(objs[0].shape).name, q.answer);
      } else if (q.family == "count_shape" || q.family == "count_color") {
        EXPECT_EQ(std::to_string(objs.size()), q.answer) << q.question;
      } else if (q.family == "exist") {
        EXPECT_EQ(objs.empty(), q.answer == "no") << q.question;
        for (const auto& o : objs)
          EXPECT_NE(q.question.find(std::string(info(o.colour).name) + " " + info(o.shape).name),
                    std::string::npos);
      } else if (q.family == "spatial" || q.family == "size") {
        EXPECT_EQ(objs.size(), 2u) << q.question;
      } else {
        EXPECT_TRUE(objs.empty()) << q.question;
      }
    }
  }
}

TEST(AnswerGrounding, FollowsEachFamilysRule) {
  const Scene s = two_objects();  // object patches: 0 → {50, 74, 75}, 1 → {51, 52}
  const std::vector<int64_t> p0 = {50, 74, 75}, p1 = {51, 52};
  const auto g = [&](const char* family, std::vector<int> objects) {
    return answer_grounding_of({family, "q", "a", std::move(objects)}, s, 24);
  };
  auto c = g("color", {1});
  EXPECT_EQ(c.heads, (std::vector<std::vector<std::vector<int64_t>>>{{p1}}));
  EXPECT_FALSE(c.sink);
  auto n = g("count_shape", {0, 1});
  EXPECT_EQ(n.heads, (std::vector<std::vector<std::vector<int64_t>>>{{p0, p1}}));
  EXPECT_TRUE(n.sink);
  auto no = g("exist_easy", {});  // "no": only the sink
  EXPECT_TRUE(no.sink);
  EXPECT_FALSE(no.empty());
  ASSERT_EQ(no.heads.size(), 1u);
  EXPECT_TRUE(no.heads[0].empty());
  auto sp = g("spatial", {1, 0});  // head 0: the first named object, head 1: the second
  EXPECT_EQ(sp.heads, (std::vector<std::vector<std::vector<int64_t>>>{{p1}, {p0}}));
  EXPECT_FALSE(sp.sink);
  EXPECT_TRUE(g("text", {}).empty());
  EXPECT_THROW(g("color", {5}), InvalidArgument);
}

TEST(AnswerGrounding, CountCentresGroundEachCountedObjectOnItsCentrePatchAlone) {
  const Scene s = two_objects();  // centres: a (42, 42) → row 3, col 3 = 75; b (56, 35) → row 2, col 4 = 52
  EXPECT_EQ(object_centre_patch(s, 0, 24), 75);
  EXPECT_EQ(object_centre_patch(s, 1, 24), 52);
  EXPECT_THROW(object_centre_patch(s, 2, 24), InvalidArgument);
  const auto g = [&](const char* family, std::vector<int> objects) {
    return answer_grounding_of({family, "q", "a", std::move(objects)}, s, 24, {.count_centres = true});
  };
  auto n = g("count_color", {0, 1});
  EXPECT_EQ(n.heads, (std::vector<std::vector<std::vector<int64_t>>>{{{75}, {52}}}));
  EXPECT_TRUE(n.sink);
  EXPECT_EQ(g("exist", {1}).heads, (std::vector<std::vector<std::vector<int64_t>>>{{{52}}}));
  // Other families keep whole footprints.
  EXPECT_EQ(g("color", {0}).heads, (std::vector<std::vector<std::vector<int64_t>>>{{{50, 74, 75}}}));
  EXPECT_EQ(g("size", {0, 1}).heads,
            (std::vector<std::vector<std::vector<int64_t>>>{{{50, 74, 75}}, {{51, 52}}}));
}

TEST(AnswerGrounding, CountFootprintsGroundCountsOnWholeObjectsWithoutTheSink) {
  const Scene s = two_objects();  // object patches: 0 → {50, 74, 75}, 1 → {51, 52}; centres 75 and 52
  const auto g = [&](const char* family, std::vector<int> objects) {
    return answer_grounding_of({family, "q", "a", std::move(objects)}, s, 24,
                               {.count_centres = true, .count_footprints = true});
  };
  auto n = g("count_color", {0, 1});
  EXPECT_EQ(n.heads, (std::vector<std::vector<std::vector<int64_t>>>{{{50, 74, 75}, {51, 52}}}));
  EXPECT_FALSE(n.sink);
  EXPECT_FLOAT_EQ(n.readout[2], 2.0f / 6.0f);  // the readout's count target stays
  // Exist questions keep count_centres' centre patches and the sink.
  auto e = g("exist", {1});
  EXPECT_EQ(e.heads, (std::vector<std::vector<std::vector<int64_t>>>{{{52}}}));
  EXPECT_TRUE(e.sink);
}

TEST(AnswerGrounding, ReadoutTargetsAreTheSpatialOffsetAndTheCount) {
  const Scene s = two_objects();  // a at (42, 42), b at (56, 35); image 336 px
  auto sp = answer_grounding_of({"spatial", "q", "left", {0, 1}}, s, 24);
  EXPECT_FLOAT_EQ(sp.readout[0], float((42.0 - 56.0) / 336.0));
  EXPECT_FLOAT_EQ(sp.readout[1], float((42.0 - 35.0) / 336.0));
  EXPECT_TRUE(std::isnan(sp.readout[2]));
  auto n = answer_grounding_of({"count_shape", "q", "2", {0, 1}}, s, 24);
  EXPECT_FLOAT_EQ(n.readout[2], 2.0f / 6.0f);
  EXPECT_TRUE(std::isnan(n.readout[0]));
  EXPECT_TRUE(std::isnan(answer_grounding_of({"color", "q", "red", {0}}, s, 24).readout[2]));
}

}  // namespace
}  // namespace vispco::train
