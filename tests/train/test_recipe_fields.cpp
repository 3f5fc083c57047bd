// The decoder-training fields of a recipe (train/recipe.h): they round-trip through JSON and are refused
// outside their stages; tokenizer_split_glyphs keeps every glyph its own piece.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/errors.h"
#include "eval/synthvqa/scene.h"
#include "train/grounding_fixtures.h"
#include "train/micro_recipe.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;
using namespace testing_grounding;

TEST(TrainRecipe, GroundingTextLossAndMimeticFieldsRoundTrip) {
  TrainRecipe r;
  r.model = micro_model();
  r.tokenizer_vocab = 400;
  r.lowres = {{.steps = 3, .batch = 2, .foreground_keep = 48, .text_loss = true, .grounding = 0.5}};
  r.mimetic_init = true;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["lowres"][0]["grounding"] = -1;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["text_loss"] = true;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
}

TEST(TrainRecipe, CountAndGlyphIndexHeadsRoundTripAndStayInTheVisionStage) {
  TrainRecipe r;
  r.model = micro_model();
  r.model.text.num_hidden_layers = 5;
  r.tokenizer_vocab = 400;
  r.vision.count_heads = true;
  r.vision.glyph_index_head = true;
  r.vision.min_texts = 4;
  r.lowres = {{.steps = 3, .batch = 2, .answer_grounding = 1.0, .count_footprints = true}};
  r.decoder.turn_weights = {{"count_shape", 3}, {"text", 2}};
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["decoder"]["turn_weights"]["counts"] = 2;  // not a family
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["decoder"]["turn_weights"]["text"] = 0;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["turn_weights"] = {{"text", 2}};
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["min_texts"] = 6;  // at most 5 inks
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["lowres"][0]["min_texts"] = 2;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["lowres"][0]["count_heads"] = true;  // a decoder stage has no patch heads
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["decoder"]["glyph_index_head"] = true;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["lowres"][0]["answer_grounding"] = 0;  // count_footprints shapes answer grounding's targets
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
}

TEST(TrainRecipe, CountCentresAndPositionLossRoundTripAndStayInTheirStages) {
  TrainRecipe r;
  r.model = micro_model();
  r.tokenizer_vocab = 400;
  r.vision.position_loss = 0.5;
  r.lowres = {{.steps = 3, .batch = 2, .answer_grounding = 1.0, .count_centres = true}};
  r.model.text.num_hidden_layers = 5;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["lowres"][0]["position_loss"] = 1.0;  // a decoder stage has no patch heads
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["lowres"][0]["answer_grounding"] = 0;  // count_centres shapes answer grounding's targets
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["position_loss"] = -1;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
}

// Pieces made of two or more characters of SynthVQA's text alphabet (the dummy-prefix "▁" aside).
int multi_glyph_pieces(const io::Tokenizer& tok) {
  int n = 0;
  for (int64_t id = 0; id < tok.vocab_size(); ++id) {
    std::string p = tok.piece_bytes(id);
    if (!p.empty() && p[0] == ' ') p.erase(0, 1);
    if (p.size() >= 2 && p.find_first_not_of(kTextAlphabet) == std::string::npos) ++n;
  }
  return n;
}

TEST(TrainRecipe, SplitGlyphsKeepsEveryCharacterOfAStringAnswerItsOwnPiece) {
  testing::TempDir tmp;
  auto r = testing_micro::micro_recipe();
  r.tokenizer_images = 300;
  r.vision.steps = 0;
  r.decoder.steps = 0;
  Trainer plain(r, tmp.str("plain"), RunContext{});
  r.tokenizer_split_glyphs = true;
  Trainer split(r, tmp.str("split"), RunContext{});
  const auto a = io::Tokenizer::load(tmp.str("plain/tokenizer.model")),
             b = io::Tokenizer::load(tmp.str("split/tokenizer.model"));
  std::printf("multi-glyph pieces: %d without, %d with tokenizer_split_glyphs\n", multi_glyph_pieces(a),
              multi_glyph_pieces(b));
  EXPECT_GT(multi_glyph_pieces(a), 0);  // BPE merges glyphs that sit together in string answers
  EXPECT_EQ(multi_glyph_pieces(b), 0);
  int glyph_tokens = 0;  // "▁" may be a piece of its own; every other piece holds one glyph
  for (auto id : b.encode("K7QX", false)) glyph_tokens += b.piece_bytes(id) == " " ? 0 : 1;
  EXPECT_EQ(glyph_tokens, 4);
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto st = r.decoder;
  st.answer_grounding = 1.0;
  st.text_glyphs = true;
  r.decoder = st;
  r.model.text.num_hidden_layers = 5;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["decoder"]["answer_grounding"] = 0;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  // The glyph readout reads the per-glyph rows after decoder layer 4: it needs text_glyphs and 6 layers.
  r.decoder.glyph_readout = 0.5;
  EXPECT_THROW(r.validate(), InvalidArgument);  // 5 layers
  r.model.text.num_hidden_layers = 6;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  j = to_json(r);
  j["decoder"]["text_glyphs"] = false;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["glyph_readout"] = 1.0;  // the vision stage has no answer rows (no text_glyphs there)
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  // The glyph head is a head of the decoder.
  r.decoder.glyph_head = r.model.text.num_attention_heads - 1;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  j = to_json(r);
  j["decoder"]["glyph_head"] = r.model.text.num_attention_heads;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j["decoder"]["glyph_head"] = -1;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  // The glyph value loss reads text glyphs' tokens: it needs text_glyphs and a weight ≥ 0.
  r.decoder.glyph_value = 2.0;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  EXPECT_TRUE(recipe_from_json(to_json(r)).trains_glyph_value());
  j = to_json(r);
  j["decoder"]["glyph_value"] = -1;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["decoder"]["text_glyphs"] = false;
  j["decoder"]["glyph_readout"] = 0;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
