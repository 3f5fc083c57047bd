// The decoder's training path (forward, backward, AdamW with warm-up + cosine, global-norm clipping) against
// an independent PyTorch implementation of the same Llama decoder and schedule:
// tests/reference/llama_adamw_reference.py, whose printed per-step losses are the reference values below.
// Same seeds, same random draws in the same order, so the two runs see identical weights and data.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "model/kv_cache.h"
#include "model/llama.h"

namespace vispco {
namespace {

constexpr int64_t kBatch = 8, kPairs = 4, kQueries = 4, kSteps = 12, kWarmup = 3;
constexpr double kLr = 3e-3;

TextConfig micro_decoder() {
  TextConfig c;
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  return c;
}

// Multi-query associative recall, drawn exactly as batch() in the reference script.
std::pair<at::Tensor, at::Tensor> recall_batch() {
  auto keys = at::rand({kBatch, 100}).argsort(int64_t{1}).narrow(1, 0, kPairs) + 10;
  auto vals = at::randint(110, 210, {kBatch, kPairs}, at::kLong);
  auto pick = at::randint(0, kPairs, {kBatch, kQueries}, at::kLong);
  const int64_t T = 1 + 2 * kPairs + 2 * kQueries;
  auto ids = at::empty({kBatch, T}, at::kLong);
  ids.select(1, 0).fill_(1);
  auto pairs = ids.narrow(1, 1, 2 * kPairs).view({kBatch, kPairs, 2});
  pairs.select(2, 0).copy_(keys);
  pairs.select(2, 1).copy_(vals);
  auto queries = ids.narrow(1, 1 + 2 * kPairs, 2 * kQueries).view({kBatch, kQueries, 2});
  queries.select(2, 0).copy_(keys.gather(1, pick));
  queries.select(2, 1).copy_(vals.gather(1, pick));
  auto target = at::full({kBatch, T}, -100, at::kLong);
  target.narrow(1, 1 + 2 * kPairs, 2 * kQueries)
      .view({kBatch, kQueries, 2})
      .select(2, 0)
      .copy_(vals.gather(1, pick));
  return {ids, target};
}

TEST(DecoderTraining, MatchesAnIndependentPyTorchReferenceStepByStep) {
  // Printed by `python3 tests/reference/llama_adamw_reference.py` (Debian python3-torch 1.13.1).
  const double reference[kSteps] = {5.638553, 5.587429, 5.542639, 5.352247, 5.388553, 5.348193,
                                    5.466342, 5.394139, 5.104493, 5.347476, 5.292269, 5.170868};
  at::set_num_threads(1);
  at::manual_seed(7);
  const auto cfg = micro_decoder();
  LlamaForCausalLM lm(cfg);
  {
    at::NoGradGuard no_grad;
    for (auto& item : lm->named_parameters()) {
      if (item.key().find("norm") != std::string::npos)
        item.value().fill_(1.0);
      else
        item.value().normal_(0.0, 0.02);
    }
  }
  torch::optim::AdamW opt(lm->parameters(), torch::optim::AdamWOptions(kLr).weight_decay(0.01));
  for (int64_t step = 0; step < kSteps; ++step) {
    const double lr = step < kWarmup
                          ? kLr * (step + 1) / kWarmup
                          : kLr * 0.5 * (1 + std::cos(M_PI * (step - kWarmup) / (kSteps - kWarmup)));
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    auto [ids, target] = recall_batch();
    const int64_t T = ids.size(1);
    TokenState state;
    state.hidden = lm->embed(ids);
    state.positions = at::arange(T, at::kLong).unsqueeze(0).expand({kBatch, T}).contiguous();
    state.valid = at::ones({kBatch, T}, at::kBool);
    state.visual = at::zeros({kBatch, T}, at::kBool);
    state.grid_index = at::full({kBatch, T}, -1, at::kLong);
    KvCache cache(cfg.num_hidden_layers);
    auto logits = lm->logits(lm->forward(state, cache));
    auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, cfg.vocab_size}), target.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
    opt.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(lm->parameters(), 1.0);
    opt.step();
    // 5e-5: the reference prints 6 decimals and the two sides may sum in a different order.
    EXPECT_NEAR(loss.item<double>(), reference[step], 5e-5) << "step " << step + 1;
  }
}

}  // namespace
}  // namespace vispco
