// The word and answer grounding losses (train/losses/word_grounding_loss.h, answer_grounding_loss.h): their
// formulas on hand-built attention rows, and their rows and targets through conversation_loss.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "model/kv_cache.h"
#include "train/conversation_loss.h"
#include "train/grounding.h"
#include "train/grounding_fixtures.h"
#include "train/losses/answer_grounding_loss.h"
#include "train/losses/word_grounding_loss.h"
#include "train/patch_labels.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;
using namespace testing_grounding;

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
  EXPECT_NEAR(first.total.item<double>(), first.token.item<double>() + 2.0 * first.grounding.item<double>(),
              1e-5);
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

TEST(AttentionTargetLoss, IsCrossEntropyToTheTargetRowsAveragedOverRowsAndLayers) {
  auto p1 = at::full({1, 2, 2, 4}, 0.25);
  p1[0][0][0] = at::tensor({0.1, 0.6, 0.2, 0.1});
  p1[0][1][1] = at::tensor({0.5, 0.0, 0.0, 0.5});
  auto p2 = at::full({1, 2, 2, 4}, 0.25);
  auto q = at::zeros({1, 2, 2, 4});
  q[0][0][0] = at::tensor({0.0, 0.5, 0.5, 0.0});    // head 0, row 0
  q[0][1][1] = at::tensor({0.25, 0.0, 0.0, 0.75});  // head 1, row 1; the other two (head, row) have none
  // Layer 1: (−½ log .6 − ½ log .2) and (−¼ log .5 − ¾ log .5); layer 2: −log .25 for both. Mean of the
  // means.
  const double l1 = 0.5 * ((-0.5 * std::log(0.6) - 0.5 * std::log(0.2)) - std::log(0.5));
  const double l2 = -std::log(0.25);
  EXPECT_NEAR(attention_target_loss({p1, p2}, q).item<double>(), 0.5 * (l1 + l2), 1e-6);
  EXPECT_EQ(attention_target_loss({p1}, at::zeros({1, 2, 2, 4})).item<double>(), 0.0);
  EXPECT_THROW(attention_target_loss({p1}, at::zeros({1, 2, 3, 4})), InvalidArgument);
}

// Answer grounding (weight 1) of one one-answer turn: head 0 on the BOS sink only.
ConversationOptions sink_grounding() {
  AnswerGrounding sink_only;
  sink_only.heads = {{}};
  sink_only.sink = true;
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{sink_only}};
  return opts;
}

TEST(ConversationLoss, AnswerGroundingTargetsTheAnswerRowOfEachTurn) {
  OneTurn t(5);  // answer grounding records layer 3
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  // Head 0 on the BOS sink only; then head 0 on two patches that are one object (head 1: no target).
  AnswerGrounding g;
  g.heads = {{{50, 51}}, {}};
  ConversationOptions opts = sink_grounding();
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
  const double want =
      -0.5 * (std::log(p[0][0][p_img + 50].item<double>()) + std::log(p[0][0][p_img + 51].item<double>()));
  EXPECT_NEAR(with_patches.answer.item<double>(), want, 1e-5);
  EXPECT_NEAR(with_patches.total.item<double>(),
              with_patches.token.item<double>() + with_patches.answer.item<double>(), 1e-5);
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
  req.prompt_ids = llava_prompt_ids(tok, q, cfg.image_token_index);
  req.prompt_ids.insert(req.prompt_ids.end(), ans.begin(), ans.end());
  ConversationOptions opts = sink_grounding();
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

TEST(ConversationLoss, GlyphGroundingTargetsTheRowPredictingEachAnswerToken) {
  OneTurn t(5);
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  ConversationOptions opts = glyph_grounded(s.answer);
  const auto loss = conversation_loss(m, images, turns, opts);
  // By hand: answer token j (of ans, EOS last) is predicted at row T − |ans| − 1 + j and spells the
  // characters of its piece (the first piece's leading "▁" is SentencePiece's dummy prefix, not a character).
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
