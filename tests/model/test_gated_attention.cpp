// The training-mode soft-pruning path (model/blocks.h attention_gated, LlamaForCausalLM::forward_gated): a
// gate of ones is plain attention; a hard 0/1 gate equals physically removing the gated keys (checked against
// attention() over the kept tokens only, and for the whole decoder against the PrefillHook removal path);
// gradients reach the gate.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "model/blocks.h"
#include "model/generate.h"
#include "model/tiny_model.h"

namespace vispco {
namespace {

using testing::max_diff;

struct Qkv {
  at::Tensor q, k, v, valid;
  Qkv(int64_t B, int64_t T) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
    q = at::randn({B, 4, T, 8}, gen);
    k = at::randn({B, 2, T, 8}, gen);
    v = at::randn({B, 2, T, 8}, gen);
    valid = at::ones({B, T}, at::kBool);
    if (B > 1) valid[1].narrow(0, 0, 2).fill_(false);  // row 1 left-padded by two
  }
};

TEST(GatedAttention, OnesGateIsPlainAttention) {
  Qkv x(2, 10);
  auto mask = causal_mask(x.valid, 10, 0);
  at::Tensor p0, p1;
  auto rows = at::full({2, 1}, 9, at::kLong);
  auto a = attention(x.q, x.k, x.v, mask, rows, &p0);
  auto b = attention_gated(x.q, x.k, x.v, mask, at::ones({2, 10}), 0, rows, &p1);
  std::printf("max diff output %.2e, probabilities %.2e\n", max_diff(a, b), max_diff(p0, p1));
  EXPECT_LT(max_diff(a, b), 1e-6);
  EXPECT_LT(max_diff(p0, p1), 1e-6);
}

// Gating the query's own key too is a log-gate bias on every logit: softmax(q·kᵀ/√D_h + mask + log g),
// computed here directly (query head h reads kv head h / 2).
TEST(GatedAttention, GatingTheOwnKeyIsALogGateBias) {
  const int64_t T = 10;
  Qkv x(2, T);
  x.valid.fill_(true);  // no padding rows (their fully masked logits have no defined softmax to compare)
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  auto gate = at::rand({2, T}, gen) * 0.9 + 0.05;
  auto mask = causal_mask(x.valid, T, 0);  // [2, 1, T, T]
  at::Tensor probs;
  auto rows = at::arange(T, at::kLong).unsqueeze(0).expand({2, T}).contiguous();
  auto out = attention_gated(x.q, x.k, x.v, mask, gate, 0, rows, &probs, /*gate_own_key=*/true);
  auto k = x.k.repeat_interleave(2, 1), v = x.v.repeat_interleave(2, 1);  // [2, 4, T, 8]
  auto logits = at::matmul(x.q, k.transpose(-1, -2)) / std::sqrt(8.0) + mask + gate.log().view({2, 1, 1, T});
  auto p_ref = at::softmax(logits, -1);
  auto out_ref = at::matmul(p_ref, v).transpose(1, 2).reshape({2, T, 32});
  std::printf("max diff probabilities %.2e, output %.2e\n", max_diff(probs, p_ref), max_diff(out, out_ref));
  EXPECT_LT(max_diff(probs, p_ref), 1e-6);
  EXPECT_LT(max_diff(out, out_ref), 1e-5);
  // Without gating the own key the diagonal weighs more: the two differ.
  auto own_free = attention_gated(x.q, x.k, x.v, mask, gate, 0);
  EXPECT_GT(max_diff(own_free, out), 1e-3);
}

TEST(GatedAttention, HardGateEqualsRemovingTheKeys) {
  const int64_t T = 12;
  Qkv x(1, T);
  x.valid.fill_(true);
  std::vector<int64_t> kept = {0, 1, 2, 4, 7, 8, 10, 11};
  auto gate = at::zeros({1, T});
  for (auto i : kept) gate[0][i] = 1.0;
  auto full = attention_gated(x.q, x.k, x.v, causal_mask(x.valid, T, 0), gate, 0);  // [1, T, H·D_h]
  auto idx = at::tensor(kept, at::kLong);
  auto sub = [&](const at::Tensor& t) { return t.index_select(2, idx); };
  const int64_t n = static_cast<int64_t>(kept.size());
  auto ref = attention(sub(x.q), sub(x.k), sub(x.v), causal_mask(at::ones({1, n}, at::kBool), n, 0));
  const double d = max_diff(full.index_select(1, idx), ref);
  std::printf("kept rows: max diff vs removal %.2e\n", d);
  EXPECT_LT(d, 1e-6);
}

TEST(GatedAttention, GradientReachesTheGate) {
  Qkv x(2, 10);
  auto gate = at::full({2, 10}, 0.7).set_requires_grad(true);
  auto out = attention_gated(x.q, x.k, x.v, causal_mask(x.valid, 10, 0), gate, 0);
  out.pow(2).sum().backward();
  EXPECT_TRUE(gate.grad().isfinite().all().item<bool>());
  EXPECT_GT(gate.grad().abs().sum().item<double>(), 0.0);
  EXPECT_THROW(attention_gated(x.q, x.k, x.v, {}, at::ones({2, 9}), 0), c10::Error);
}

// Gates chosen visual tokens off from layer `from` on.
struct FixedGate : KeyGateHook {
  int64_t from;
  at::Tensor g;
  at::Tensor gate(int64_t layer, const TokenState&, const at::Tensor&) override {
    return layer == from ? g : at::Tensor();
  }
};
// Removes the same tokens before layer `from`.
struct FixedRemoval : PrefillHook {
  int64_t from;
  at::Tensor keep;  // [1, T'] indices
  bool acts_before(int64_t layer) const override { return layer == from; }
  bool apply(int64_t, TokenState& s, const LayerSignals&) override {
    s = gather_tokens(s, keep);
    return true;
  }
};

TEST(GatedAttention, DecoderWithHardGateEqualsPhysicalRemoval) {
  auto m = testing::load_tiny();
  VlmRequest req{testing::test_pixels(56, 21), m.prompt_ids("What colour is the small cube?")};
  auto vis = m.encode_images(req.pixels.unsqueeze(0)).embeds.clone();
  auto& lm = m.net()->language_model;
  auto s0 = build_prefill_state(m, {req}, vis);
  const int64_t T = s0.hidden.size(1);
  auto vpos = at::nonzero(s0.visual[0]).view({-1});  // N_v = 16 positions
  auto gate = at::ones({1, T});
  std::vector<int64_t> keep;
  for (int64_t t = 0; t < T; ++t) keep.push_back(t);
  for (int64_t j : {1, 2, 5, 8, 9, 13, 14}) {
    const int64_t t = vpos[j].item<int64_t>();
    gate[0][t] = 0.0;
    keep.erase(std::find(keep.begin(), keep.end(), t));
  }
  FixedGate fg;
  fg.from = 2;
  fg.g = gate;
  TokenState s1 = s0;
  auto h_gated = lm->forward_gated(s1, fg);  // [1, T, D]
  FixedRemoval fr;
  fr.from = 2;
  fr.keep = at::tensor(keep, at::kLong).unsqueeze(0);
  TokenState s2 = s0;
  KvCache cache(m.config().text.num_hidden_layers);
  at::Tensor h_removed;
  {
    c10::InferenceMode guard;
    h_removed = lm->forward(s2, cache, &fr);  // [1, T', D]
  }
  const double d = max_diff(h_gated.index_select(1, fr.keep[0]), h_removed);
  std::printf("decoder: kept tokens' final hidden, gated vs removed: max diff %.2e\n", d);
  EXPECT_LT(d, 1e-4);
}

}  // namespace
}  // namespace vispco
