// The readout losses of stage 2 (train/losses/readout_loss.h, glyph_readout_loss.h, glyph_value_loss.h)
// through conversation_loss, each against the hidden state read by hand.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "model/kv_cache.h"
#include "model/llama.h"
#include "train/conversation_loss.h"
#include "train/grounding_fixtures.h"

namespace vispco::train {
namespace {

using namespace testing_grounding;

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
  const double want =
      0.5 * (std::pow(pred[0].item<double>() - 0.25, 2) + std::pow(pred[1].item<double>() + 0.5, 2));
  EXPECT_NEAR(loss.readout.item<double>(), want, 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), loss.token.item<double>() + loss.answer.item<double>() + 2.0 * want,
              1e-4);
  // A turn without readout targets adds nothing; a readout without its head is refused.
  opts.turn_answers = {{AnswerGrounding{.heads = {{{50}}}}}};
  EXPECT_EQ(conversation_loss(m, images, turns, opts).readout.item<double>(), 0.0);
  opts.readout_head = torch::nn::Linear(nullptr);
  EXPECT_THROW(conversation_loss(m, images, turns, opts), InvalidArgument);
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

}  // namespace
}  // namespace vispco::train
