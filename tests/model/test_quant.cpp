// int8 linear layers (model/quant.h): one layer against a dequantise-then-matmul reference with the error
// bound of dynamic activation quantisation; the tiny model's logits close to fp32; pruned + quantised decode
// equals pruned + quantised recomputation; the float weights are released; bad names refused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/quant.h"
#include "prune/plan.h"
#include "prune/plan_hook.h"
#include "test_util.h"
#include "tiny_model.h"

namespace vispco {
namespace {

TEST(Quant, ParsesNames) {
  EXPECT_EQ(parse_quant("none"), QuantMode::kNone);
  EXPECT_EQ(parse_quant("int8"), QuantMode::kInt8);
  try {
    parse_quant("int4");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("valid: none, int8"), std::string::npos);
  }
}

TEST(Quant, LinearMatchesTheDequantisedWeightWithinTheActivationStep) {
  auto m = testing::load_tiny();
  auto& q = m.net()->language_model->model->layers[0]->as<LlamaDecoderLayerImpl>()->self_attn->q_proj;
  const auto w = q->weight.detach().clone();  // [out, in] fp32, before quantisation
  auto x = at::randn({3, 5, w.size(1)});
  const auto rep = quantize_int8(*m.net(), false);
  EXPECT_EQ(q->weight.numel(), 0);  // the float weights were released
  const auto wq = dequantized_weight(q);
  ASSERT_TRUE(wq.defined());
  // Weights: symmetric per row, |w − ŵ| ≤ scale / 2 with scale = max|w_row| / 127.
  const auto scale = w.abs().amax(1, true) / 127;
  EXPECT_TRUE(((w - wq).abs() <= scale / 2 + 1e-7).all().item<bool>());
  EXPECT_FALSE(at::equal(w, wq));
  // Activations: one uint8 scale per call, s_x = (max − min) / (2^bits − 1) (range widened to hold 0; 7 bits
  // where the kernels need reduce_range), so each x moves by at most s_x / 2 and each output by at most
  // s_x / 2 · Σ|ŵ_row| (plus fp32 rounding). A kernel whose 8-bit sums saturate (x86 without VNNI) breaks it.
  ASSERT_TRUE(rep.activation_bits == 7 || rep.activation_bits == 8);
  const auto y = linear_forward(q, x);
  const auto ref = at::matmul(x, wq.t());
  const double lo = std::min(0.0, x.min().item<double>()), hi = std::max(0.0, x.max().item<double>());
  const double s_x = (hi - lo) / ((1 << rep.activation_bits) - 1);
  const auto bound = (s_x / 2) * wq.abs().sum(1) + 1e-4;  // [out]
  EXPECT_TRUE(((y - ref).abs() <= bound).all().item<bool>()) << (y - ref).abs().max().item<double>();
  EXPECT_GT((y - at::matmul(x, w.t())).abs().max().item<double>(), 0.0);  // it is not the float layer
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 5, w.size(0)}));
  // A layer that was not quantised is the float layer.
  auto& fc1 = m.net()->vision_tower->vision_model->layers[0]->as<ClipEncoderLayerImpl>()->fc1;
  EXPECT_FALSE(dequantized_weight(fc1).defined());
  const auto xv = at::randn({2, fc1->weight.size(1)});
  EXPECT_TRUE(at::allclose(linear_forward(fc1, xv), fc1->forward(xv)));
}

struct Run {
  std::vector<std::vector<int64_t>> tokens;
  at::Tensor first_logits;
};

Run run(VisionLanguageModel& m, const std::string& plan_text, int64_t n_new) {
  const auto px = testing::test_pixels(m.config().vision.image_size, 3);
  GenerationConfig gc;
  gc.max_new_tokens = n_new;
  gc.stop_at_eos = false;
  PlanHook hook(parse_plan(plan_text, m.shape()), m.shape(), 0);
  auto out = generate(m, {{px, m.prompt_ids("What colour is the cube?")}}, gc,
                      hook.plan().empty() ? nullptr : &hook, true);
  return {out.tokens, out.step_logits[0]};
}

TEST(Quant, TinyModelLogitsStayCloseToFloat) {
  auto f = testing::load_tiny();
  auto q = testing::load_tiny();
  const auto rep = quantize_int8(*q.net(), true);
  const auto& c = f.config();
  // Decoder: 7 per layer, lm_head when untied; tower: 6 per layer run or stored, projector 2.
  const int64_t expected = 7 * c.text.num_hidden_layers + (c.text.tie_word_embeddings ? 0 : 1) +
                           6 * c.vision.num_hidden_layers + 2;
  EXPECT_EQ(rep.n_layers, expected);
  EXPECT_LT(static_cast<double>(rep.bytes_int8), 0.3 * static_cast<double>(rep.bytes_before) + 1e5);
  const auto a = run(f, "none", 1), b = run(q, "none", 1);
  const double scale = a.first_logits.abs().max().item<double>();
  const double diff = (a.first_logits - b.first_logits).abs().max().item<double>();
  std::printf("int8 tiny model: first logits max |diff| %.3e of max |logit| %.3e\n", diff, scale);
  EXPECT_LE(diff, 0.05 * scale);
  EXPECT_GT(diff, 0.0);
}

TEST(Quant, PrunedQuantisedDecodeEqualsRecomputation) {
  // Each decode step with the KV cache against the same step recomputed from scratch (prompt + tokens so far)
  // with the same plan and int8 weights. Activations are quantised per call (one token in decode, the whole
  // sequence in the recomputation), so the logits agree to the quantisation error, not bit for bit; the
  // tokens must agree wherever the top-2 margin exceeds twice that error.
  auto m = testing::load_tiny();
  quantize_int8(*m.net(), false);
  const std::string plan = "divprune:layer=0,keep=4";
  const auto px = testing::test_pixels(m.config().vision.image_size, 3);
  auto ids = m.prompt_ids("What colour is the cube?");
  GenerationConfig gc;
  gc.max_new_tokens = 4;
  gc.stop_at_eos = false;
  PlanHook hook(parse_plan(plan, m.shape()), m.shape(), 0);
  auto cached = generate(m, {{px, ids}}, gc, &hook, true);
  ASSERT_EQ(cached.tokens[0].size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    GenerationConfig one = gc;
    one.max_new_tokens = 1;
    PlanHook h(parse_plan(plan, m.shape()), m.shape(), 0);
    auto out = generate(m, {{px, ids}}, one, &h, true);
    const auto a = cached.step_logits[t][0], b = out.step_logits[0][0];
    const double diff = (a - b).abs().max().item<double>(), scale = a.abs().max().item<double>();
    EXPECT_LE(diff, 0.05 * scale) << "step " << t;
    const auto top2 = std::get<0>(a.topk(2));
    if ((top2[0] - top2[1]).item<double>() > 2 * diff)
      EXPECT_EQ(out.tokens[0][0], cached.tokens[0][t]) << "step " << t;
    std::printf("step %zu: logits max |diff| %.2e of %.2e\n", t, diff, scale);
    ids.push_back(cached.tokens[0][t]);
  }
}

}  // namespace
}  // namespace vispco
