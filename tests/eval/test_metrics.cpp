// Tests of answer normalisation and VQA metrics; expected values computed by hand in the comments.
#include <gtest/gtest.h>

#include "eval/metrics.h"

namespace vispco::eval {
namespace {

TEST(Metrics, NormalisesCasePunctuationArticlesNumbersYesNo) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"Red", "red"},
      {"  The   red.  ", "red"},
      {"a circle", "circle"},
      {"An apple!", "apple"},
      {"Two", "2"},
      {"twenty", "20"},
      {"none", "0"},
      {"3", "3"},
      {"1,000", "1000"},
      {"2.5", "2.5"},
      {"Yeah", "yes"},
      {"Nope.", "no"},
      {"isn't", "isnt"},
      {"left-side", "left side"},
      {"7K3", "7k3"},
      {"\tCR\n", "cr"},
      {"", ""},
      {"the", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(normalize_answer(in), want) << "input '" << in << "'";
}

TEST(Metrics, YesNoTakesTheFirstWord) {
  EXPECT_EQ(yes_no_of("Yes, there is a red circle."), "yes");
  EXPECT_EQ(yes_no_of("no"), "no");
  EXPECT_EQ(yes_no_of("Nope"), "no");
  EXPECT_EQ(yes_no_of("There is no circle"), "");
  EXPECT_EQ(yes_no_of(""), "");
}

TEST(Metrics, VqaSoftAccuracyOnHandMadeAnswerLists) {
  // 10 answers, k of them "2": leaving out a matching answer leaves k−1 matches, another leaves k;
  // mean over the 10 of min(1, matches/3).
  const auto ten = [](int k) {
    std::vector<std::string> a(10, "3");
    for (int i = 0; i < k; ++i) a[static_cast<size_t>(i)] = i % 2 ? "two" : "2";  // number words normalise
    return a;
  };
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("2", ten(0)), 0.0);
  EXPECT_NEAR(vqa_soft_accuracy("2", ten(1)), (1 * 0.0 + 9 * (1.0 / 3)) / 10, 1e-12);          // 0.3
  EXPECT_NEAR(vqa_soft_accuracy("Two", ten(2)), (2 * (1.0 / 3) + 8 * (2.0 / 3)) / 10, 1e-12);  // 0.6
  EXPECT_NEAR(vqa_soft_accuracy("2", ten(3)), (3 * (2.0 / 3) + 7 * 1.0) / 10, 1e-12);          // 0.9
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("2", ten(4)), 1.0);
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("2", ten(10)), 1.0);
  // 3 answers {red, red, blue}, prediction "red": (1/3 + 1/3 + 2/3) / 3 = 4/9.
  EXPECT_NEAR(vqa_soft_accuracy("red", {"red", "Red", "blue"}), 4.0 / 9.0, 1e-12);
  EXPECT_NEAR(vqa_soft_accuracy("blue", {"red", "Red", "blue"}), (1.0 / 3 + 1.0 / 3 + 0.0) / 3, 1e-12);
  // One answer: exact match; none: 0.
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("the cat", {"Cat"}), 1.0);
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("dog", {"Cat"}), 0.0);
  EXPECT_DOUBLE_EQ(vqa_soft_accuracy("dog", {}), 0.0);
}

TEST(Metrics, CharacterAccuracyIsOneMinusTheCharacterErrorRate) {
  // Levenshtein distances by hand, divided by the reference's 4 characters.
  EXPECT_DOUBLE_EQ(char_accuracy("M85T", "M85T"), 1.0);
  EXPECT_DOUBLE_EQ(char_accuracy("m 8 5 t", "M85T"), 1.0);  // case and spaces do not count
  EXPECT_DOUBLE_EQ(char_accuracy("M85", "M85T"), 0.75);     // one deletion
  EXPECT_DOUBLE_EQ(char_accuracy("M85TT", "M85T"), 0.75);   // one insertion
  EXPECT_DOUBLE_EQ(char_accuracy("M58T", "M85T"), 0.5);     // two substitutions (no transpositions)
  EXPECT_DOUBLE_EQ(char_accuracy("XM85T", "M85T"), 0.75);   // shifted by one: one insertion, not four subs
  EXPECT_DOUBLE_EQ(char_accuracy("X", "M85T"), 0.0);        // 4 edits
  EXPECT_DOUBLE_EQ(char_accuracy("WXYZ9", "M85T"), 0.0);    // 5 edits, clamped at 0
  EXPECT_DOUBLE_EQ(char_accuracy("", ""), 1.0);
  EXPECT_DOUBLE_EQ(char_accuracy("A7", ""), 0.0);
  EXPECT_DOUBLE_EQ(score_answer("7K", "7KX", {}).chars, 2.0 / 3.0);
}

TEST(Metrics, ScoresAndAggregatesPerFamily) {
  MetricSummary sum;
  sum.add("color", score_answer("Red", "red", {}));             // exact 1
  sum.add("color", score_answer("blue", "red", {}));            // exact 0
  sum.add("exist", score_answer("Yes, there is.", "yes", {}));  // exact 0, yes/no 1
  sum.add("exist", score_answer("no", "yes", {}));              // exact 0, yes/no 0
  sum.add("vqa", score_answer("2", "2", {"2", "2", "3", "3", "3", "3", "3", "3", "3", "3"}));  // vqa 0.6

  const SampleScore s = score_answer("Yes, there is.", "yes", {});
  EXPECT_EQ(s.exact, 0.0);
  EXPECT_TRUE(s.is_yes_no);
  EXPECT_TRUE(s.yes_no_correct);
  EXPECT_EQ(s.vqa, -1.0);

  EXPECT_EQ(sum.per_family.at("color").n, 2u);
  EXPECT_DOUBLE_EQ(sum.per_family.at("color").exact_match(), 0.5);
  EXPECT_DOUBLE_EQ(sum.per_family.at("exist").yes_no_accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(sum.per_family.at("exist").exact_match(), 0.0);
  EXPECT_NEAR(sum.per_family.at("vqa").vqa_accuracy(), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(sum.per_family.at("vqa").exact_match(), 1.0);
  // Character accuracy: "Red"/"red" 1, "blue"/"red" 0 (4 edits for 3 characters, clamped), "yesthereis"/"yes"
  // 0, "no"/"yes" 0, "2"/"2" 1: colour 0.5, overall 2 / 5.
  EXPECT_DOUBLE_EQ(sum.per_family.at("color").char_accuracy(), 0.5);
  EXPECT_NEAR(sum.overall.char_accuracy(), 0.4, 1e-12);
  // Overall headline accuracy: (1 + 0 + 0 + 0 + 0.6) / 5 = 0.32; exact (1 + 0 + 0 + 0 + 1) / 5 = 0.4.
  EXPECT_EQ(sum.overall.n, 5u);
  EXPECT_NEAR(sum.overall.accuracy(), 0.32, 1e-12);
  EXPECT_NEAR(sum.overall.exact_match(), 0.4, 1e-12);
  EXPECT_EQ(sum.overall.n_yes_no, 2u);
  EXPECT_EQ(sum.overall.n_vqa, 1u);

  const nlohmann::json j = sum.to_json();
  EXPECT_EQ(j["per_family"]["color"]["n"], 2);
  EXPECT_FALSE(j["per_family"]["color"].contains("vqa_accuracy"));
  EXPECT_NEAR(j["overall"]["accuracy"].get<double>(), 0.32, 1e-12);
  const std::string md = sum.to_markdown();
  EXPECT_NE(md.find("| color | 2 | 50.0 | 50.0 | 50.0 | – | – |"), std::string::npos) << md;
  EXPECT_NE(md.find("| all | 5 | 32.0 | 40.0 | 40.0 | 60.0 | 50.0 |"), std::string::npos) << md;
}

}  // namespace
}  // namespace vispco::eval
