// The decoder-training additions that break the binding plateau: object patches of a scene, object words of a
// question, the grounding loss, the text-token loss and the mimetic attention initialisation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "core/errors.h"
#include "eval/synthvqa/generator.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/presets.h"
#include "test_util.h"
#include "train/conversation_loss.h"
#include "train/grounding.h"
#include "train/losses/answer_grounding_loss.h"
#include "train/losses/word_grounding_loss.h"
#include "train/micro_recipe.h"
#include "train/mimetic_init.h"
#include "train/patch_labels.h"
#include "train/recipe.h"
#include "train/scene_questions.h"
#include "train/trainer.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

Scene two_objects() {
  Scene s;
  SceneObject a;
  a.x = 42, a.y = 42, a.radius = 20;  // covers patch centres within 15 px: (35|49, 35|49)
  SceneObject b;
  b.x = 56, b.y = 35, b.radius = 10;  // within 7.5 px: (49, 35) and (63, 35); drawn on top of a
  s.objects = {a, b};
  return s;
}

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

io::Tokenizer question_tokenizer(const testing::TempDir& tmp) {
  std::vector<std::string> corpus;
  for (uint64_t i = 0; i < 300; ++i) {
    auto s = make_sample(5, i);
    corpus.push_back(s.question + " " + s.answer);
  }
  io::train_sentencepiece(corpus, 400, tmp.str("tok.model"));
  return io::Tokenizer::load(tmp.str("tok.model"));
}

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

TEST(GroundingLoss, IsMinusLogMassOfHeadZeroOnTheTargetsAveragedOverRowsAndLayers) {
  auto p1 = at::full({1, 2, 2, 4}, 0.25);
  p1[0][0][0] = at::tensor({0.1, 0.6, 0.2, 0.1});
  p1[0][1][0] = at::tensor({0.0, 0.0, 0.0, 1.0});  // head 1: ignored
  auto p2 = at::full({1, 2, 2, 4}, 0.25);
  auto target = at::zeros({1, 2, 4}, at::kBool);
  target[0][0][1] = true;
  target[0][0][2] = true;  // row 1 has no target: left out
  const double expected = 0.5 * (-std::log(0.8) - std::log(0.5));
  EXPECT_NEAR(grounding_loss({p1, p2}, target).item<double>(), expected, 1e-6);
  EXPECT_EQ(grounding_loss({p1}, at::zeros({1, 2, 4}, at::kBool)).item<double>(), 0.0);
  EXPECT_THROW(grounding_loss({p1}, at::zeros({1, 3, 4}, at::kBool)), InvalidArgument);
}

// The training tests' micro model with a third decoder layer (grounding records layers 0 and 1, each < L − 1).
LlavaConfig micro_model() {
  auto c = testing_micro::micro_recipe().model;
  c.text.num_hidden_layers = 3;
  return c;
}

// One single-turn conversation about sample 0 of seed 11 on a random micro model, and the same sequence laid out
// by hand ("USER: <image>\n{q} ASSISTANT:{a}</s>", no padding) for the independent computations below.
struct OneTurn {
  testing::TempDir tmp;
  io::Tokenizer tok;
  LlavaConfig cfg;
  VisionLanguageModel m;
  SynthSample s = make_sample(11, 0);
  at::Tensor images;
  std::vector<std::vector<std::pair<std::string, std::string>>> turns;
  std::vector<int64_t> ans;  ///< answer ids + EOS
  VlmRequest req;            ///< prompt + answer + EOS

  explicit OneTurn(int64_t layers, int64_t kv_heads = 1)
      : tok(question_tokenizer(tmp)),
        cfg(with_layers(layers, kv_heads)),
        m(cfg, random_llava_net(cfg, 3, at::kFloat), tok, RunContext{}) {
    images = m.preprocess(s.rgb).unsqueeze(0);
    turns = {{{s.question, s.answer}}};
    req.prompt_ids = io::encode_llava_prompt(tok, s.question, cfg.image_token_index);
    ans = tok.encode(s.answer, false);
    ans.push_back(tok.eos_id());
    req.prompt_ids.insert(req.prompt_ids.end(), ans.begin(), ans.end());
  }
  static LlavaConfig with_layers(int64_t layers, int64_t kv_heads) {
    auto c = micro_model();
    c.text.num_hidden_layers = layers;
    c.text.num_key_value_heads = kv_heads;
    return c;
  }
  /// The prefill state of `req` built directly from the tower and projector.
  TokenState state() {
    auto feats = m.net()->vision_tower->forward(images, cfg.n_vision_layers_used(), true).features;
    return build_prefill_state(m, {req}, m.net()->multi_modal_projector->forward(feats));
  }
};

TEST(ConversationLoss, TextLossCoversEveryTextTokenAfterTheImage) {
  OneTurn t(3);
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  ConversationOptions opts;
  opts.text_loss = true;
  const double got = conversation_loss(m, images, turns, opts).total.item<double>();
  // By hand: the NLL of every id after the image.
  auto state = t.state();
  KvCache cache(cfg.text.num_hidden_layers);
  auto logp = m.net()->language_model->logits(m.net()->language_model->forward(state, cache)).log_softmax(-1);
  const auto& ids = req.prompt_ids;
  const int64_t p = std::find(ids.begin(), ids.end(), cfg.image_token_index) - ids.begin();
  const int64_t n_after = static_cast<int64_t>(ids.size()) - p - 1, T = state.hidden.size(1);
  double nll = 0;
  for (int64_t j = 0; j < n_after; ++j) nll -= logp[0][T - n_after - 1 + j][ids[p + 1 + j]].item<double>();
  EXPECT_NEAR(got, nll / n_after, 1e-4);
  // The answer-only loss is a different number (fewer tokens).
  EXPECT_GT(std::abs(conversation_loss(m, images, turns) .item<double>() - got), 1e-3);
}

TEST(ConversationLoss, GroundingLossFallsWhenFittingOneBatch) {
  testing::TempDir tmp;
  auto tok = question_tokenizer(tmp);
  const auto cfg = micro_model();
  VisionLanguageModel m(cfg, random_llava_net(cfg, 3, at::kFloat), tok, RunContext{});
  auto s = make_sample(11, 0);  // its own question names objects (color family: "What color is the <shape>?")
  ASSERT_EQ(s.family, "color");
  std::vector<int64_t> patches;
  for (size_t o = 0; o < s.scene.objects.size(); ++o)
    if (s.question.find(info(s.scene.objects[o].shape).name) != std::string::npos)
      for (auto p : object_patches(s.scene, o, cfg.vision.grid())) patches.push_back(p);
  ASSERT_FALSE(patches.empty());
  auto images = m.preprocess(s.rgb).unsqueeze(0);
  std::vector<std::vector<std::pair<std::string, std::string>>> turns = {{{s.question, s.answer}}};
  ConversationOptions opts;
  opts.grounding = 2.0;
  opts.turn_patches = {{patches}};
  std::vector<at::Tensor> params;
  for (auto& p : m.net()->language_model->parameters()) params.push_back(p.set_requires_grad(true));
  for (auto& p : m.net()->multi_modal_projector->parameters()) params.push_back(p.set_requires_grad(true));
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-2));
  auto first = conversation_loss(m, images, turns, opts);
  EXPECT_NEAR(first.total.item<double>(), first.token.item<double>() + 2.0 * first.grounding.item<double>(), 1e-5);
  // At initialisation attention is near uniform over the ~600 keys: the mass on a few patches is small.
  const double n_keys = static_cast<double>(cfg.n_visual_tokens());
  EXPECT_GT(first.grounding.item<double>(), std::log(n_keys / (2.0 * patches.size())));
  double last = 0;
  for (int i = 0; i < 15; ++i) {
    auto l = conversation_loss(m, images, turns, opts);
    opt.zero_grad();
    l.total.backward();
    opt.step();
    last = l.grounding.item<double>();
  }
  EXPECT_LT(last, 0.5 * first.grounding.item<double>());
  opts.turn_patches = {};
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
}

TEST(MimeticInit, TiesQueryToKeyAndOutputToValue) {
  TextConfig c;
  c.vocab_size = 64, c.hidden_size = 48, c.intermediate_size = 64, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2;
  LlamaForCausalLM lm(c);
  at::manual_seed(0);
  mimetic_attention_init(lm, 0.5);
  const int64_t Dh = 12, G = 2;
  for (int64_t l = 0; l < 2; ++l) {
    auto& a = *lm->model->layers[l]->as<LlamaDecoderLayerImpl>()->self_attn;
    for (int64_t j = 0; j < 2; ++j) {
      auto lead = a.q_proj->weight.narrow(0, j * G * Dh, Dh).flatten();
      auto key = a.k_proj->weight.narrow(0, j * Dh, Dh).flatten();
      const double cos = (lead.dot(key) / (lead.norm() * key.norm())).item<double>();
      EXPECT_GT(cos, 0.95);  // noise 0.2 of the signal's scale: cos ≈ 1/√(1 + 0.04)
      for (int64_t g = 0; g < G; ++g)
        EXPECT_TRUE(at::allclose(a.o_proj->weight.narrow(1, (j * G + g) * Dh, Dh),
                                 a.v_proj->weight.narrow(0, j * Dh, Dh).t() * 0.25));
    }
    // A token attends to itself more than to an unrelated one: the lead head's logit q(x)·k(x) is on
    // average well above the spread of q(x)·k(y) (with independent q and k both average 0).
    auto x = at::randn({512, 48}), y = at::randn({512, 48});
    auto q = x.matmul(a.q_proj->weight.narrow(0, 0, Dh).t());
    auto self = (q * x.matmul(a.k_proj->weight.narrow(0, 0, Dh).t())).sum(-1);
    auto cross = (q * y.matmul(a.k_proj->weight.narrow(0, 0, Dh).t())).sum(-1);
    EXPECT_GT(self.mean().item<double>(), 2 * cross.std().item<double>());
  }
  EXPECT_THROW(mimetic_attention_init(lm, -1), InvalidArgument);
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
          EXPECT_NE(q.question.find(std::string(info(o.colour).name) + " " + info(o.shape).name), std::string::npos);
      } else if (q.family == "spatial" || q.family == "size") {
        EXPECT_EQ(objs.size(), 2u) << q.question;
      } else {
        EXPECT_TRUE(objs.empty()) << q.question;
      }
    }
  }
}

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

}  // namespace
}  // namespace vispco::train

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

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
  EXPECT_EQ(g("size", {0, 1}).heads, (std::vector<std::vector<std::vector<int64_t>>>{{{50, 74, 75}}, {{51, 52}}}));
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

TEST(GlyphPatches, SplitTheStringsBoxEvenlyAmongItsCharacters) {
  Scene s;
  SceneText t;
  t.text = "AB3";
  t.x = 14, t.y = 28, t.w = 42, t.h = 14;  // shares of 14 px; patch centres at 7 + 14k → columns 1, 2, 3, row 2
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

TEST(AttentionTargetLoss, IsCrossEntropyToTheTargetRowsAveragedOverRowsAndLayers) {
  auto p1 = at::full({1, 2, 2, 4}, 0.25);
  p1[0][0][0] = at::tensor({0.1, 0.6, 0.2, 0.1});
  p1[0][1][1] = at::tensor({0.5, 0.0, 0.0, 0.5});
  auto p2 = at::full({1, 2, 2, 4}, 0.25);
  auto q = at::zeros({1, 2, 2, 4});
  q[0][0][0] = at::tensor({0.0, 0.5, 0.5, 0.0});   // head 0, row 0
  q[0][1][1] = at::tensor({0.25, 0.0, 0.0, 0.75});  // head 1, row 1; the other two (head, row) have none
  // Layer 1: (−½ log .6 − ½ log .2) and (−¼ log .5 − ¾ log .5); layer 2: −log .25 for both. Mean of the means.
  const double l1 = 0.5 * ((-0.5 * std::log(0.6) - 0.5 * std::log(0.2)) - std::log(0.5));
  const double l2 = -std::log(0.25);
  EXPECT_NEAR(attention_target_loss({p1, p2}, q).item<double>(), 0.5 * (l1 + l2), 1e-6);
  EXPECT_EQ(attention_target_loss({p1}, at::zeros({1, 2, 2, 4})).item<double>(), 0.0);
  EXPECT_THROW(attention_target_loss({p1}, at::zeros({1, 2, 3, 4})), InvalidArgument);
}

TEST(ConversationLoss, AnswerGroundingTargetsTheAnswerRowOfEachTurn) {
  OneTurn t(5);  // answer grounding records layer 3
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  // Head 0 on the BOS sink only; then head 0 on two patches that are one object (head 1: no target).
  AnswerGrounding g;
  g.heads = {{{50, 51}}, {}};
  AnswerGrounding sink_only;
  sink_only.heads = {{}};
  sink_only.sink = true;
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{sink_only}};
  const auto with_sink = conversation_loss(m, images, turns, opts);
  opts.turn_answers = {{g}};
  const auto with_patches = conversation_loss(m, images, turns, opts);
  // By hand: record layer 3 at the last prompt token (the one before the answer tokens and EOS).
  auto state = t.state();
  const int64_t T = state.hidden.size(1), row = T - static_cast<int64_t>(ans.size()) - 1;
  AttentionRowRecorder rec({3}, at::full({1, 1}, row, at::kLong));
  KvCache cache(cfg.text.num_hidden_layers);
  m.net()->language_model->forward(state, cache, &rec);
  const auto p = rec.recorded().at(0)[0];  // [H, 1, T]
  const int64_t p_img = std::find(req.prompt_ids.begin(), req.prompt_ids.end(), cfg.image_token_index) -
                        req.prompt_ids.begin();  // first visual token's position (no padding)
  EXPECT_NEAR(with_sink.answer.item<double>(), -std::log(p[0][0][0].item<double>()), 1e-5);  // head 0, BOS
  const double want = -0.5 * (std::log(p[0][0][p_img + 50].item<double>()) + std::log(p[0][0][p_img + 51].item<double>()));
  EXPECT_NEAR(with_patches.answer.item<double>(), want, 1e-5);
  EXPECT_NEAR(with_patches.total.item<double>(), with_patches.token.item<double>() + with_patches.answer.item<double>(), 1e-5);
  opts.turn_answers = {};
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
}

TEST(ConversationLoss, AnswerRowAtFirstGlyphMovesCountGroundingToTheRowThatEmitsTheDigit) {
  OneTurn t(5);
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  // A count answer: digits are split, so "3" is a bare "▁" and then "3".
  const std::string q = "How many circles are there?";
  turns = {{{q, "3"}}};
  ans = tok.encode("3", false);
  ASSERT_EQ(ans.size(), 2u);
  ASSERT_EQ(tok.decode({ans[0]}), "");
  ASSERT_EQ(tok.decode(ans), "3");
  ans.push_back(tok.eos_id());
  req.prompt_ids = io::encode_llava_prompt(tok, q, cfg.image_token_index);
  req.prompt_ids.insert(req.prompt_ids.end(), ans.begin(), ans.end());
  AnswerGrounding sink_only;
  sink_only.heads = {{}};
  sink_only.sink = true;
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{sink_only}};
  const double at_prompt = conversation_loss(m, images, turns, opts).answer.item<double>();
  opts.answer_row_at_first_glyph = true;
  const double at_digit = conversation_loss(m, images, turns, opts).answer.item<double>();
  // By hand: head 0's BOS mass at layer 3 of the last prompt token and of the "▁" token after it.
  auto state = t.state();
  const int64_t T = state.hidden.size(1), last_prompt = T - static_cast<int64_t>(ans.size()) - 1;
  AttentionRowRecorder rec({3}, at::tensor({last_prompt, last_prompt + 1}, at::kLong).unsqueeze(0));
  KvCache cache(cfg.text.num_hidden_layers);
  m.net()->language_model->forward(state, cache, &rec);
  const auto p = rec.recorded().at(0)[0];  // [H, 2, T]
  EXPECT_NEAR(at_prompt, -std::log(p[0][0][0].item<double>()), 1e-5);
  EXPECT_NEAR(at_digit, -std::log(p[0][1][0].item<double>()), 1e-5);
  EXPECT_GT(std::abs(at_prompt - at_digit), 1e-4);  // the two rows differ, so the test can tell them apart
  // A one-token answer ("▁red"-like words) keeps the last prompt token.
  turns = {{{s.question, s.answer}}};
  opts.answer_row_at_first_glyph = false;
  const double word_plain = conversation_loss(m, images, turns, opts).answer.item<double>();
  opts.answer_row_at_first_glyph = true;
  EXPECT_DOUBLE_EQ(conversation_loss(m, images, turns, opts).answer.item<double>(), word_plain);
}

// Keeps the full hidden state entering decoder layer `layer` (the engine's PrefillHook contract).
struct HiddenTap : PrefillHook {
  int64_t layer;
  at::Tensor hidden;
  explicit HiddenTap(int64_t l) : layer(l) {}
  bool acts_before(int64_t l) const override { return l == layer; }
  bool apply(int64_t l, TokenState& state, const LayerSignals&) override {
    if (l == layer) hidden = state.hidden.clone();
    return false;
  }
};

TEST(ConversationLoss, ReadoutRegressesTheAnswerRowsHiddenStateOntoTheFamilysTargets) {
  OneTurn t(6);  // the readout reads after layer 4
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  at::manual_seed(5);
  torch::nn::Linear head(cfg.text.hidden_size, 3);
  AnswerGrounding g;
  g.heads = {{{50}}};
  g.readout = {0.25f, -0.5f, NAN};  // a spatial-style target: offsets only
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{g}};
  opts.readout = 2.0;
  opts.readout_head = head;
  const auto loss = conversation_loss(m, images, turns, opts);
  // By hand: the hidden state entering layer 5 at the last prompt token, through the same head.
  auto state = t.state();
  const int64_t T = state.hidden.size(1), row = T - static_cast<int64_t>(ans.size()) - 1;
  HiddenTap tap(5);
  KvCache cache(cfg.text.num_hidden_layers);
  m.net()->language_model->forward(state, cache, &tap);
  const auto pred = head(tap.hidden[0][row]);  // [3]
  const double want = 0.5 * (std::pow(pred[0].item<double>() - 0.25, 2) + std::pow(pred[1].item<double>() + 0.5, 2));
  EXPECT_NEAR(loss.readout.item<double>(), want, 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), loss.token.item<double>() + loss.answer.item<double>() + 2.0 * want, 1e-4);
  // A turn without readout targets adds nothing; a readout without its head is refused.
  opts.turn_answers = {{AnswerGrounding{.heads = {{{50}}}}}};
  EXPECT_EQ(conversation_loss(m, images, turns, opts).readout.item<double>(), 0.0);
  opts.readout_head = torch::nn::Linear(nullptr);
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
}

// Answer grounding that pretends `answer` is read from glyphs: character c of the answer at grid patch 30 +
// c.
ConversationOptions glyph_grounded(const std::string& answer) {
  AnswerGrounding g;
  for (size_t c = 0; c < answer.size(); ++c) g.glyphs.push_back({static_cast<int64_t>(30 + c)});
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{g}};
  return opts;
}

TEST(ConversationLoss, GlyphReadoutPredictsEachTextAnswerTokenThroughTheLmHeadAfterTheReadoutLayer) {
  OneTurn t(6);  // the glyph readout reads after layer 4
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  ConversationOptions opts = glyph_grounded(s.answer);
  opts.glyph_readout = 0.5;
  const auto loss = conversation_loss(m, images, turns, opts);
  // By hand: answer token j (EOS excluded) is predicted at row T − |ans| − 1 + j; a token that spells no
  // character (a bare "▁") has no glyph row. At each glyph row: the hidden state entering layer 5, the final
  // RMSNorm (its formula written out here), the LM head, −log softmax of the token.
  auto state = t.state();
  const int64_t T = state.hidden.size(1), first = T - static_cast<int64_t>(ans.size()) - 1;
  HiddenTap tap(5);
  KvCache cache(cfg.text.num_hidden_layers);
  auto& lm = m.net()->language_model;
  lm->forward(state, cache, &tap);
  const auto& norm = lm->model->norm;
  double sum = 0;
  int rows = 0;
  for (size_t j = 0; j + 1 < ans.size(); ++j) {
    if (tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + static_cast<long>(j) + 1)).size() ==
        tok.decode(std::vector<int64_t>(ans.begin(), ans.begin() + static_cast<long>(j))).size())
      continue;                                                     // spells no character
    const auto h = tap.hidden[0][first + static_cast<int64_t>(j)];  // [D]
    const auto normed = h * (h.pow(2).mean() + norm->eps).rsqrt() * norm->weight;
    const auto lens = lm->logits(normed.view({1, 1, -1})).view({-1});  // [V]
    sum -= lens.log_softmax(0)[ans[j]].item<double>();
    ++rows;
  }
  ASSERT_GT(rows, 0);
  EXPECT_NEAR(loss.glyph.item<double>(), sum / rows, 1e-4);
  EXPECT_NEAR(loss.total.item<double>(),
              loss.token.item<double>() + loss.answer.item<double>() + 0.5 * sum / rows, 1e-4);
  // A turn without glyph targets adds nothing; a glyph readout without answer grounding is refused.
  opts.turn_answers = {{AnswerGrounding{.heads = {{{50}}}}}};
  EXPECT_EQ(conversation_loss(m, images, turns, opts).glyph.item<double>(), 0.0);
  opts.answer_grounding = 0;
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
}

TEST(ConversationLoss, GlyphValueClassifiesTheGlyphHeadsValueAtEachGlyphsVisualToken) {
  OneTurn t(5, 2);  // grounded layer 3; two key/value groups, so which one the glyph head reads matters
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  at::manual_seed(7);
  const int64_t d_head = cfg.text.d_head(), n_grid = cfg.vision.grid() * cfg.vision.grid();
  torch::nn::Linear head(d_head, 25);
  ConversationOptions opts = glyph_grounded(s.answer);
  opts.glyph_value = 0.5;
  opts.glyph_value_head = head;
  opts.glyph_head = 1;
  const std::vector<std::pair<int64_t, int64_t>> glyphs = {{30, 3}, {31, 7}, {200, 25}};  // (patch, class)
  opts.patch_glyphs = at::zeros({1, n_grid}, at::kLong);
  for (const auto& [patch, cls] : glyphs) opts.patch_glyphs[0][patch] = cls;
  const auto loss = conversation_loss(m, images, turns, opts);
  // By hand: the hidden state entering layer 3 at each glyph patch's visual token (image placeholder index +
  // patch), layer 3's input RMSNorm written out, the rows of v_proj's weight that make key/value group 1 (the
  // group of head 1 when 2 heads share 2 groups), the head, −log softmax of class − 1; mean over the glyphs.
  auto state = t.state();
  HiddenTap tap(3);
  KvCache cache(cfg.text.num_hidden_layers);
  auto& lm = m.net()->language_model;
  lm->forward(state, cache, &tap);
  auto& layer = *lm->model->layers[3]->as<LlamaDecoderLayerImpl>();
  ASSERT_FALSE(layer.self_attn->v_proj->bias.defined());
  const auto& norm = layer.input_layernorm;
  const int64_t p_img =
      std::find(req.prompt_ids.begin(), req.prompt_ids.end(), cfg.image_token_index) - req.prompt_ids.begin();
  const auto by_hand = [&](int64_t group) {
    const auto w_v = layer.self_attn->v_proj->weight.narrow(0, group * d_head, d_head);  // [D_h, D]
    double sum = 0;
    for (const auto& [patch, cls] : glyphs) {
      const auto h = tap.hidden[0][p_img + patch];  // [D]
      const auto normed = h * (h.pow(2).mean() + norm->eps).rsqrt() * norm->weight;
      sum -= head(at::matmul(w_v, normed).unsqueeze(0))[0].log_softmax(0)[cls - 1].item<double>();
    }
    return sum / static_cast<double>(glyphs.size());
  };
  const double group1 = by_hand(1);
  EXPECT_NEAR(loss.glyph_value.item<double>(), group1, 1e-5);
  EXPECT_NEAR(loss.total.item<double>(),
              loss.token.item<double>() + loss.answer.item<double>() + 0.5 * group1, 1e-4);
  // Head 0 reads group 0: another value, another loss (so the test tells the groups apart).
  opts.glyph_head = 0;
  const double group0 = by_hand(0);
  EXPECT_GT(std::abs(group0 - group1), 1e-4);
  EXPECT_NEAR(conversation_loss(m, images, turns, opts).glyph_value.item<double>(), group0, 1e-5);
  // An image without glyphs adds nothing; no head, or glyph labels of the wrong shape, are refused.
  auto with = opts.patch_glyphs;
  opts.patch_glyphs = at::zeros({1, n_grid}, at::kLong);
  EXPECT_EQ(conversation_loss(m, images, turns, opts).glyph_value.item<double>(), 0.0);
  opts.patch_glyphs = at::zeros({1, n_grid - 1}, at::kLong);
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
  opts.patch_glyphs = with;
  opts.glyph_value_head = torch::nn::Linear(nullptr);
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
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

TEST(ConversationLoss, GlyphGroundingTargetsTheRowPredictingEachAnswerToken) {
  OneTurn t(5);
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  ConversationOptions opts = glyph_grounded(s.answer);
  const auto loss = conversation_loss(m, images, turns, opts);
  // By hand: answer token j (of ans, EOS last) is predicted at row T − |ans| − 1 + j and spells the characters of
  // its piece (the first piece's leading "▁" is SentencePiece's dummy prefix, not a character).
  auto state = t.state();
  const int64_t T = state.hidden.size(1), n_tok = static_cast<int64_t>(ans.size()) - 1;
  const int64_t first = T - static_cast<int64_t>(ans.size()) - 1;  // the last prompt token
  AttentionRowRecorder rec({3}, at::arange(first, first + n_tok, at::kLong).view({1, -1}));
  KvCache cache(cfg.text.num_hidden_layers);
  m.net()->language_model->forward(state, cache, &rec);
  const auto p = rec.recorded().at(0)[0];  // [H, n_tok, T]
  const int64_t p_img =
      std::find(req.prompt_ids.begin(), req.prompt_ids.end(), cfg.image_token_index) - req.prompt_ids.begin();
  int rows = 0;
  const auto by_hand = [&](int64_t head) {  // the mean over grounded rows of −mean log p on the row's glyphs
    double sum = 0;
    size_t c = 0;
    rows = 0;
    for (int64_t j = 0; j < n_tok; ++j) {
      std::string text = tok.piece_bytes(ans[static_cast<size_t>(j)]);
      if (j == 0 && !text.empty() && text[0] == ' ') text.erase(0, 1);
      if (text.empty()) continue;
      double row = 0;
      for (size_t k = 0; k < text.size(); ++k)
        row -= std::log(p[head][j][p_img + 30 + int64_t(c + k)].item<double>());
      sum += row / double(text.size());
      c += text.size();
      ++rows;
    }
    return sum / std::max(rows, 1);
  };
  const double head0 = by_hand(0);
  ASSERT_GT(rows, 0);
  std::printf("answer '%s': %d grounded rows\n", s.answer.c_str(), rows);
  EXPECT_NEAR(loss.answer.item<double>(), head0, 1e-5);
  // Another glyph head: the same rows and targets on that head's attention (the micro model has 2 heads).
  opts.glyph_head = 1;
  const double head1 = by_hand(1);
  EXPECT_GT(std::abs(head1 - head0), 1e-4);  // the heads differ, so the test tells them apart
  EXPECT_NEAR(conversation_loss(m, images, turns, opts).answer.item<double>(), head1, 1e-5);
  opts.glyph_head = cfg.text.num_attention_heads;
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
