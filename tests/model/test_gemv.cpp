// Tests of vispco's gemv (model/gemv/gemv.h): every instruction-set path this CPU runs against y = x Wᵀ + b
// computed in double, at sizes that are not multiples of the vector widths; its operand checks;
// dense_linear's use of it; and the model-level check that greedy decode (gemv) picks the tokens a full
// recomputation (LibTorch's GEMMs) picks.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/dense_linear.h"
#include "model/gemv/gemv.h"
#include "model/tiny_model.h"

namespace vispco {
namespace {

// Reference in double: y[..., o] = Σ_i x[..., i] W[o, i] + b[o], and the sum of the terms' magnitudes.
struct Reference {
  at::Tensor y, magnitude;
};
Reference reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const auto terms = x.to(at::kDouble).unsqueeze(-2) * w.to(at::kDouble);  // [..., out, in]
  auto y = terms.sum(-1), mag = terms.abs().sum(-1);
  if (b.defined()) {
    y = y + b.to(at::kDouble);
    mag = mag + b.to(at::kDouble).abs();
  }
  return {y, mag};
}

// The error bound of one path, from its summation order (Higham, "Accuracy and Stability of Numerical
// Algorithms" §3.1: a sum whose every term passes through at most k fp32 roundings errs by at most
// γ_k Σ|terms|, γ_k = k u / (1 − k u), u = 2^-24):
// - vector paths: each lane sums ⌈in / 8⌉ or fewer products (8 fp32 lanes for AVX2, 16 for AVX-512 and
//   for VDPBF16PS, which adds its 32 exact bf16 products pairwise into 16 lanes), then a lane tree (depth
//   ≤ 4), a scalar tail of < 32 products (one rounding for the product, one per add), and the bias: k ≤
//   ⌈in / 8⌉ + 4 + 2·32 + 1;
// - scalar path: one running sum in index order, each product rounded once: k ≤ in + 2.
// fp32 and bf16 inputs are exact in double, so the reference itself is exact to ~2^-53. A bf16 result is
// then rounded once more to 8 significant bits: + 2^-8 |y|.
double fp32_bound_factor(GemvIsa isa, int64_t in) {
  const double u = std::ldexp(1.0, -24);
  const double k = isa == GemvIsa::kScalar ? in + 2 : (in + 7) / 8 + 4 + 64 + 1;
  return k * u / (1 - k * u);
}

class GemvPath : public ::testing::TestWithParam<GemvIsa> {
 protected:
  void SetUp() override {
    if (!gemv_isa_supported(GetParam()))
      GTEST_SKIP() << "this CPU does not run gemv's " << gemv_isa_name(GetParam()) << " path";
  }
};

TEST_P(GemvPath, MatchesTheDoubleReference) {
  const GemvIsa isa = GetParam();
  at::manual_seed(11);
  double worst[2] = {0, 0};  // largest |error| / bound seen (≤ 1 passes), fp32 and bf16
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (int64_t in : {1, 7, 31, 33, 301, 1000})
      for (int64_t out : {1, 5, 37})
        for (int64_t rows = 1; rows <= kGemvMaxRows; ++rows)
          for (bool with_bias : {false, true}) {
            const auto w = at::randn({out, in}).to(dtype);
            const auto x = at::randn({rows, 1, in}).to(dtype);
            const auto b = with_bias ? at::randn({out}).to(dtype) : at::Tensor();
            const auto y = gemv(x, w, b, isa);
            ASSERT_EQ(y.sizes(), at::IntArrayRef({rows, 1, out}));
            ASSERT_EQ(y.scalar_type(), dtype);
            ASSERT_TRUE(y.is_contiguous());
            const auto ref = reference(x, w, b);
            auto bound = fp32_bound_factor(isa, in) * ref.magnitude;
            if (dtype == at::kBFloat16) bound = bound * (1 + 1.0 / 256) + ref.y.abs() / 256;
            const auto err = (y.to(at::kDouble) - ref.y).abs();
            const double ratio = (err / (bound + 1e-300)).max().item<double>();
            worst[dtype == at::kBFloat16] = std::max(worst[dtype == at::kBFloat16], ratio);
            EXPECT_LE(ratio, 1.0) << gemv_isa_name(isa) << " " << c10::toString(dtype) << " in " << in
                                  << " out " << out << " rows " << rows << " bias " << with_bias
                                  << ": max |err| " << err.max().item<double>();
          }
  std::printf("gemv %s: largest error / bound = %.3g fp32, %.3g bf16\n", gemv_isa_name(isa), worst[0],
              worst[1]);
}

// The loops' block boundaries (4 output rows per block, 16 per parallel unit) at a size with remainders in
// every dimension, on more than one thread's share, checked against the same reference.
TEST_P(GemvPath, LargeOddShapeMatchesTheDoubleReference) {
  const GemvIsa isa = GetParam();
  at::manual_seed(12);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    const int64_t in = 2053, out = 517;
    const auto w = at::randn({out, in}).to(dtype), x = at::randn({3, in}).to(dtype);
    const auto b = at::randn({out}).to(dtype);
    const auto y = gemv(x, w, b, isa);
    const auto ref = reference(x, w, b);
    auto bound = fp32_bound_factor(isa, in) * ref.magnitude;
    if (dtype == at::kBFloat16) bound = bound * (1 + 1.0 / 256) + ref.y.abs() / 256;
    EXPECT_LE(((y.to(at::kDouble) - ref.y).abs() - bound).max().item<double>(), 0.0)
        << gemv_isa_name(isa) << " " << c10::toString(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemvPath,
                         ::testing::Values(GemvIsa::kScalar, GemvIsa::kAvx2, GemvIsa::kAvx512,
                                           GemvIsa::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<GemvIsa>& info) {
                           return std::string(gemv_isa_name(info.param));
                         });

TEST(Gemv, RejectsWhatItDoesNotTake) {
  const auto w = at::randn({6, 8}), x = at::randn({1, 8});
  EXPECT_TRUE(gemv_accepts(x, w, at::randn({6})));
  EXPECT_FALSE(gemv_accepts(at::randn({kGemvMaxRows + 1, 8}), w, {}));  // too many rows
  EXPECT_FALSE(gemv_accepts(x.to(at::kBFloat16), w, {}));               // mixed dtypes
  EXPECT_FALSE(gemv_accepts(x.to(at::kHalf), w.to(at::kHalf), {}));     // fp16
  EXPECT_FALSE(gemv_accepts(x, at::randn({8, 6}).t(), {}));             // weight not contiguous
  EXPECT_FALSE(gemv_accepts(at::randn({1, 7}), w, {}));                 // in mismatch
  EXPECT_FALSE(gemv_accepts(x, w, at::randn({5})));                     // bias size
  EXPECT_THROW(gemv(at::randn({1, 7}), w), c10::Error);
}

TEST(Gemv, DenseLinearTakesItOnlyWithoutGradients) {
  at::manual_seed(13);
  const auto w = at::randn({40, 70}).to(at::kBFloat16), b = at::randn({40}).to(at::kBFloat16);
  const auto x = at::randn({2, 1, 70}).to(at::kBFloat16);
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(at::equal(dense_linear(x, w, b), gemv(x, w, b)));  // same path, bit for bit
  }
  // A weight that needs its gradient goes to at::linear, so backward works.
  const auto wf = at::randn({40, 70}).requires_grad_(), xf = at::randn({1, 70});
  at::AutoGradMode grad(true);
  const auto y = dense_linear(xf, wf);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(at::allclose(wf.grad(), xf.expand({40, 70})));  // d Σ_o (x Wᵀ)_o / dW[o, i] = x[i]
}

// Greedy decode steps run their one-row products through gemv; recomputing every step's logits by one
// prefill over prompt + generated tokens runs them through LibTorch's GEMMs (many rows). The argmax must
// agree wherever the recomputed best logit leads the runner-up by more than the two paths can disagree:
// fp32 differs by summation order (~1e-5 here, tests/model/test_generate.cpp); bf16 rounds every product's
// output to 8 bits in both paths independently, so near ties (random weights have many) may flip — counted
// and printed, and each flip must be a near tie.
void check_greedy_matches_recomputation(c10::ScalarType dtype, double tie) {
  RunContext ctx;
  ctx.dtype = dtype;
  auto m = VisionLanguageModel::load(testing::tiny_model_dir(), ctx);
  const int64_t n = 8;
  VlmRequest req{testing::test_pixels(56, 5), m.prompt_ids("What colour is the cube?")};
  auto out = generate(m, {req}, testing::greedy(n));
  ASSERT_EQ(out.tokens[0].size(), static_cast<size_t>(n));

  c10::InferenceMode guard;
  auto& lm = m.net()->language_model;
  auto vis = m.encode_images(req.pixels.unsqueeze(0).to(dtype));
  auto prefix = build_prefill_state(m, {req}, vis.embeds);
  const int64_t T0 = prefix.hidden.size(1);
  std::vector<int64_t> gen(out.tokens[0].begin(), out.tokens[0].end() - 1);
  auto gen_emb = lm->embed(at::tensor(gen, at::kLong).view({1, -1}));
  TokenState full;
  full.hidden = at::cat({prefix.hidden, gen_emb}, 1);
  full.positions = at::arange(full.hidden.size(1), at::kLong).view({1, -1});
  full.valid = at::ones({1, full.hidden.size(1)}, at::kBool);
  full.visual = at::cat({prefix.visual, at::zeros({1, (int64_t)gen.size()}, at::kBool)}, 1);
  full.grid_index = at::cat({prefix.grid_index, at::full({1, (int64_t)gen.size()}, -1, at::kLong)}, 1);
  KvCache cache(m.config().text.num_hidden_layers);
  const auto logits = lm->logits(lm->forward(full, cache))[0];  // [T, V] fp32
  int flips = 0;
  for (int64_t s = 0; s < n; ++s) {
    const auto row = logits[T0 - 1 + s];
    const int64_t want = row.argmax().item<int64_t>(), got = out.tokens[0][s];
    if (want == got) continue;
    ++flips;
    const double lead = (row[want] - row[got]).item<double>();
    EXPECT_LE(lead, tie) << c10::toString(dtype) << " step " << s << ": recomputation picks " << want
                         << ", decode " << got;
  }
  std::printf("%s: %d of %lld greedy tokens differ from the recomputation's argmax\n", c10::toString(dtype),
              flips, static_cast<long long>(n));
  if (dtype == at::kFloat) EXPECT_EQ(flips, 0);
}

TEST(Gemv, GreedyDecodeMatchesRecomputationFp32) { check_greedy_matches_recomputation(at::kFloat, 1e-4); }
TEST(Gemv, GreedyDecodeMatchesRecomputationBf16) { check_greedy_matches_recomputation(at::kBFloat16, 0.05); }

}  // namespace
}  // namespace vispco
