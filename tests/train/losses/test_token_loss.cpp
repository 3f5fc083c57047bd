// The token loss of stage 2 with text_loss: every text token after the image, checked against the NLL summed
// by hand (train/losses/token_loss.h through conversation_loss).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/kv_cache.h"
#include "train/conversation_loss.h"
#include "train/grounding_fixtures.h"

namespace vispco::train {
namespace {

using namespace testing_grounding;

TEST(ConversationLoss, TextLossCoversEveryTextTokenAfterTheImage) {
  OneTurn t(3);
  auto& [tmp, tok, cfg, m, s, images, turns, ans, req] = t;
  at::NoGradGuard ng;
  ConversationOptions opts;
  opts.text_loss = true;
  const auto parts = conversation_loss(m, images, turns, opts);
  const double got = parts.total.item<double>();
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
  EXPECT_EQ(parts.n_targets, n_after);  // the count it averaged over
  // The answer-only loss is a different number (fewer tokens).
  EXPECT_GT(std::abs(conversation_loss(m, images, turns).item<double>() - got), 1e-3);
}

}  // namespace
}  // namespace vispco::train
