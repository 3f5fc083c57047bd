// Incremental answer text: deltas concatenate to the final text; stop sequences cut it; nothing that could
// still become a stop sequence is sent early.
#include <gtest/gtest.h>

#include <map>

#include "serve/text_stream.h"

namespace vispco::serve {
namespace {

// Token id → text piece; decode concatenates (a stand-in for SentencePiece without the leading "▁").
std::string decode(const std::vector<int64_t>& ids) {
  static const std::map<int64_t, std::string> pieces = {{1, " two"}, {2, " red"}, {3, " cubes"}, {4, "\n"},
                                                        {5, "END"},  {6, "E"},    {7, "ND"},     {8, " "},
                                                        {9, "\xC3"}, {10, "\xA9"}};
  std::string s;
  for (auto id : ids) s += pieces.at(id);
  return s;
}

// Like SentencePiece with byte fallback: token 20 is the first byte of "é" alone, shown as U+FFFD until
// token 21 (its second byte) completes it.
std::string decode_fallback(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == 20)
      s += (i + 1 < ids.size() && ids[i + 1] == 21) ? "\xC3\xA9" : "\xEF\xBF\xBD";
    else if (ids[i] == 21)
      continue;
    else
      s += decode({ids[i]});
  }
  return s;
}

std::string run(TextStream& ts, const std::vector<int64_t>& ids, std::vector<std::string>* deltas = nullptr) {
  std::string all;
  for (auto id : ids) {
    if (!ts.push(id)) break;
    const auto d = ts.take_delta();
    if (deltas) deltas->push_back(d);
    all += d;
  }
  return all + ts.finish();
}

TEST(TextStream, DeltasConcatenateToTheTrimmedText) {
  TextStream ts(decode, {});
  std::vector<std::string> deltas;
  const auto all = run(ts, {1, 2, 8, 3, 8}, &deltas);
  EXPECT_EQ(all, "two red  cubes");  // leading and trailing spaces trimmed, as `vispco generate` prints
  EXPECT_EQ(ts.text(), "two red  cubes");
  EXPECT_EQ(deltas[0], "two");
  EXPECT_EQ(deltas[1], " red");
  EXPECT_EQ(deltas[2], "");  // a trailing space is held until text follows it
  EXPECT_EQ(deltas[3], "  cubes");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStream, StopSequenceCutsTheTextAndEndsGeneration) {
  TextStream ts(decode, {"\n"});
  EXPECT_TRUE(ts.push(1));
  EXPECT_TRUE(ts.push(2));
  EXPECT_FALSE(ts.push(4));  // "\n" appears
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.text(), "two red");
  EXPECT_FALSE(ts.push(3));  // nothing after a stop
  EXPECT_EQ(ts.text(), "two red");
}

TEST(TextStream, HoldsBackAPossibleStopPrefixAcrossTokens) {
  TextStream ts(decode, {"END"});
  std::vector<std::string> deltas;
  EXPECT_TRUE(ts.push(1));
  deltas.push_back(ts.take_delta());
  EXPECT_TRUE(ts.push(6));  // "E" may begin "END": not sent yet
  deltas.push_back(ts.take_delta());
  EXPECT_EQ(deltas[1], "");
  EXPECT_FALSE(ts.push(7));  // "ND" completes it
  EXPECT_EQ(deltas[0] + deltas[1] + ts.finish(), "two");
  EXPECT_EQ(ts.text(), "two");
  // A held prefix that never completes is released at the end.
  TextStream ts2(decode, {"END"});
  EXPECT_EQ(run(ts2, {1, 6}), "twoE");
}

TEST(TextStream, HoldsBackAnUnfinishedUtf8Character) {
  TextStream ts(decode, {});
  ts.push(1);
  ts.take_delta();
  ts.push(9);  // first byte of "é"
  EXPECT_EQ(ts.take_delta(), "");
  ts.push(10);
  EXPECT_EQ(ts.take_delta(), "\xC3\xA9");
}

TEST(TextStream, HoldsBackAReplacementCharacterThatTheNextTokenCompletes) {
  TextStream ts(decode_fallback, {});
  std::string all;
  ts.push(1);
  all += ts.take_delta();
  ts.push(20);  // "two\uFFFD": not sent
  EXPECT_EQ(ts.take_delta(), "");
  ts.push(21);  // "twoé"
  all += ts.take_delta();
  all += ts.finish();
  EXPECT_EQ(all, "two\xC3\xA9");
  EXPECT_EQ(all, ts.text());
}

}  // namespace
}  // namespace vispco::serve
