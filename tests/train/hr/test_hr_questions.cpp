// SynthVQA-HR questions derived from a scene (train/hr/hr_questions.h): a hand-built scene's questions are
// the ones its objects allow, and every benchmark sample's own question and answer are among those derived
// from its scene (the templates agree with eval/synthvqa/hr_families.cpp, checked against the generator).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "eval/synthvqa/hr_generator.h"
#include "train/hr/hr_questions.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

SceneObject object(Shape shape, Colour colour, SizeClass size) {
  SceneObject o;
  o.shape = shape;
  o.colour = colour;
  o.size = size;
  return o;
}

// Large: red circle, red square, blue circle. Tiny: green star, yellow star, green cross. One string "K7".
Scene hand_scene() {
  Scene s;
  s.width = s.height = 672;
  s.objects = {object(Shape::kCircle, Colour::kRed, SizeClass::kLarge),
               object(Shape::kSquare, Colour::kRed, SizeClass::kLarge),
               object(Shape::kCircle, Colour::kBlue, SizeClass::kLarge),
               object(Shape::kStar, Colour::kGreen, SizeClass::kTiny),
               object(Shape::kStar, Colour::kYellow, SizeClass::kTiny),
               object(Shape::kCross, Colour::kGreen, SizeClass::kTiny)};
  s.texts.push_back({"K7", "black", 9, 10, 10, 30, 12});
  return s;
}

TEST(HrQuestions, AHandBuiltScenesQuestionsAreTheOnesItsObjectsAllow) {
  std::set<std::tuple<std::string, std::string, std::string>> got;
  for (const auto& q : hr_all_questions(hand_scene())) got.insert({q.family, q.question, q.answer});
  const std::set<std::tuple<std::string, std::string, std::string>> want = {
      {"large_color", "What color is the large square?", "red"},  // circle is not unique among large
      {"large_shape", "What shape is the large blue object?", "circle"},
      {"large_count", "How many large red objects are there?", "2"},
      {"large_count", "How many large blue objects are there?", "1"},
      {"tiny_color", "What color is the tiny cross?", "green"},
      {"tiny_shape", "What shape is the tiny yellow object?", "star"},
      {"tiny_count", "How many tiny stars are there?", "2"},
      {"tiny_count", "How many tiny crosses are there?", "1"},
      {"text", "What does the text say?", "K7"}};
  EXPECT_EQ(got, want);
}

TEST(HrQuestions, EveryBenchmarkSamplesQuestionIsAmongItsScenesQuestions) {
  for (uint64_t i = 0; i < 35; ++i) {  // five samples of each of the seven families
    const auto s = make_hr_sample(20260602, i);
    const auto qs = hr_all_questions(s.scene);
    const bool found = std::any_of(qs.begin(), qs.end(), [&](const QaPair& q) {
      return q.family == s.family && q.question == s.question && q.answer == s.answer;
    });
    EXPECT_TRUE(found) << "sample " << i << " (" << s.family << "): " << s.question << " → " << s.answer;
  }
}

TEST(HrQuestions, SamplingVisitsEveryFamilyBeforeRepeatingOne) {
  Rng rng(7);
  const auto qs = sample_hr_questions(hand_scene(), rng, 7);
  ASSERT_EQ(qs.size(), 7u);
  std::set<std::string> families, questions;
  for (const auto& q : qs) {
    families.insert(q.family);
    questions.insert(q.question);
  }
  EXPECT_EQ(families.size(), 7u);
  EXPECT_EQ(questions.size(), 7u);
  Rng all(7);
  EXPECT_EQ(sample_hr_questions(hand_scene(), all, 100).size(), 9u);  // every question once, then no more
}

TEST(HrQuestions, NamesAnswerMatchesWholeWordsOnly) {
  EXPECT_TRUE(names_answer("What color is the tiny star?", "star"));
  EXPECT_TRUE(names_answer("What shape is the tiny Red object?", "red"));
  EXPECT_FALSE(names_answer("How many tiny stars are there?", "star"));   // "stars" is another word
  EXPECT_FALSE(names_answer("What color is the tired cross?", "red"));    // "tired" ends with "red"
  EXPECT_FALSE(names_answer("What color is the reddish cross?", "red"));  // "reddish" starts with it
  EXPECT_TRUE(names_answer("red: what shape?", "red"));                   // at the very start
  EXPECT_FALSE(names_answer("What does the text say?", ""));
}

// A conversation never asks a question whose answer an earlier question names: in the hand scene "What color
// is the tiny cross?" (green) names "cross", and no question's answer is "cross" there; "What shape is the
// tiny yellow object?" (star) would be given away by a question naming "star" — checked over many draws.
TEST(HrQuestions, AConversationNeverAsksWhatAnEarlierQuestionNames) {
  const auto scene = hand_scene();
  const auto all = hr_all_questions(scene);
  int64_t longest = 0, shortest = 100;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    const auto& first = all[seed % all.size()];
    const auto conv = hr_conversation(first, scene, rng, 16);
    ASSERT_FALSE(conv.empty());
    EXPECT_EQ(conv[0].question, first.question);
    std::set<std::string> seen;
    for (size_t t = 0; t < conv.size(); ++t) {
      EXPECT_TRUE(seen.insert(conv[t].question).second) << "asked twice: " << conv[t].question;
      for (size_t e = 0; e < t; ++e) {
        // independent check of the rule: the answer as a lower-case word among the earlier question's words
        std::string words = " ";
        for (char c : conv[e].question)
          words += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : ' ';
        words += " ";
        EXPECT_EQ(words.find(" " + conv[t].answer + " "), std::string::npos)
            << conv[e].question << " gives away " << conv[t].question << " → " << conv[t].answer;
      }
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(conv.size()));
    shortest = std::min<int64_t>(shortest, static_cast<int64_t>(conv.size()));
  }
  // 9 questions, one give-away: "How many large red objects are there?" names "red", the answer of "What
  // color is the large square?" — that one is dropped when the count comes first, kept when it comes later.
  EXPECT_EQ(longest, 9);
  EXPECT_EQ(shortest, 8);
}

}  // namespace
}  // namespace vispco::train
