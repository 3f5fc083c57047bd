// Shared blocks (RMSNorm, RoPE, GQA attention, masks) against the naive references in reference.h.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "model/attention_chunks.h"
#include "model/blocks.h"
#include "model/reference.h"

namespace vispco {
namespace {

// Largest |a − b|; +inf when either holds a NaN (so a NaN never passes a tolerance check).
double max_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.isnan().any().item<bool>() || b.isnan().any().item<bool>()) return INFINITY;
  return (a - b).abs().max().item<double>();
}

TEST(Blocks, RmsNormMatchesDefinition) {
  at::manual_seed(1);
  auto x = at::randn({5, 16}) * 3, w = at::randn({16});
  const double d = max_diff(rms_norm(x, w, 1e-5), ref::rms_norm(x, w, 1e-5));
  std::printf("rms_norm max |diff| = %.3g\n", d);
  EXPECT_LT(d, 1e-5);
}

TEST(Blocks, RopeRotatesHalfPairs) {
  at::manual_seed(2);
  const int64_t T = 6, D = 8;
  auto x = at::randn({T, D});
  std::vector<int64_t> pos = {0, 3, 4, 7, 100, 2047};  // not contiguous: positions survive pruning
  auto rot = rotary_tables(at::tensor(pos).view({1, T}), D, 10000.0, at::kFloat);
  auto got = apply_rotary(x.view({1, 1, T, D}), rot).view({T, D});
  const double d = max_diff(got, ref::rope(x, pos, 10000.0));
  std::printf("rope max |diff| = %.3g\n", d);
  EXPECT_LT(d, 1e-4);
  // Position 0 is the identity rotation.
  EXPECT_LT(max_diff(got[0], x[0]), 1e-6);
}

// Attention with H query heads over H_kv kv heads, left padding and a cache offset, head by head.
void check_attention(int64_t H, int64_t Hkv) {
  at::manual_seed(3);
  const int64_t B = 2, T = 3, past = 4, S = past + T, Dh = 8;
  auto q = at::randn({B, H, T, Dh}), k = at::randn({B, Hkv, S, Dh}), v = at::randn({B, Hkv, S, Dh});
  auto valid = at::ones({B, S}, at::kBool);
  valid[1].narrow(0, 0, 2).fill_(false);  // row 1 left-padded by two keys
  auto probs_rows = at::tensor({2, 0}, at::kLong).view({B, 1});
  at::Tensor probs;
  auto out = attention(q, k, v, causal_mask(valid, T, past), probs_rows, &probs).view({B, T, H, Dh});
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<bool> vb(S);
    for (int64_t s = 0; s < S; ++s) vb[s] = valid[b][s].item<bool>();
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv = h / (H / Hkv);  // HF repeat_kv: kv head j serves query heads j·G … j·G+G−1
      auto expect = ref::attention_head(q[b][h], k[b][kv], v[b][kv], vb, past);
      worst = std::max(worst, max_diff(out.select(0, b).select(1, h), expect));
    }
  }
  std::printf("attention H=%ld H_kv=%ld max |diff| = %.3g\n", (long)H, (long)Hkv, worst);
  EXPECT_LT(worst, 1e-5);
  // Recorded probabilities: rows sum to 1, masked keys get 0.
  ASSERT_EQ(probs.sizes(), (at::IntArrayRef{B, H, 1, S}));
  EXPECT_LT(max_diff(probs.sum(-1), at::ones({B, H, 1})), 1e-5);
  // Row 1 records query 0, at cache index `past`: padding keys 0, 1 and future keys past+1, past+2 get 0.
  for (int64_t s : {int64_t(0), int64_t(1), past + 1, past + 2})
    EXPECT_EQ(probs[1].select(-1, s).abs().max().item<float>(), 0.0f) << "key " << s;
  EXPECT_GT(probs[1].select(-1, past).min().item<float>(), 0.0f);
}

TEST(Blocks, AttentionMultiHeadMatchesLoops) { check_attention(4, 4); }
TEST(Blocks, AttentionGroupedQueryMatchesLoops) { check_attention(4, 2); }
TEST(Blocks, AttentionMultiQueryMatchesLoops) { check_attention(6, 1); }

TEST(Blocks, AttentionInQueryChunksMatchesLoopsAndTheOneBlock) {
  at::manual_seed(4);
  const int64_t B = 2, H = 4, Hkv = 2, T = 23, past = 6, S = past + T, Dh = 8;
  auto q = at::randn({B, H, T, Dh}), k = at::randn({B, Hkv, S, Dh}), v = at::randn({B, Hkv, S, Dh});
  auto valid = at::ones({B, S}, at::kBool);
  valid[0].narrow(0, 0, 3).fill_(false);
  const auto mask = causal_mask(valid, T, past);
  const auto rows = at::tensor({0, 22, 9, 5, 5, 16}, at::kLong).view({B, 3});  // rows in different chunks
  // B·H·S·4 = 928 bytes a query row: a 5-row budget makes chunks of 5, 5, 5, 5, 3.
  const int64_t budget = 5 * B * H * S * 4;
  EXPECT_EQ(attention_query_chunk(B, H, S, budget), 5);
  EXPECT_EQ(attention_query_chunk(B, H, S, 1), 1);
  at::Tensor whole_probs, chunk_probs;
  const auto whole = attention(q, k, v, mask, rows, &whole_probs);  // 64 MiB budget: one block
  const auto chunked = attention_in_chunks(q, k, v, mask, rows, &chunk_probs, budget).view({B, T, H, Dh});
  EXPECT_LT(max_diff(chunked.view({B, T, H * Dh}), whole), 1e-6);
  EXPECT_LT(max_diff(chunk_probs, whole_probs), 1e-7);
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<bool> vb(S);
    for (int64_t s = 0; s < S; ++s) vb[s] = valid[b][s].item<bool>();
    for (int64_t h = 0; h < H; ++h)
      worst = std::max(worst, max_diff(chunked.select(0, b).select(1, h),
                                       ref::attention_head(q[b][h], k[b][h / 2], v[b][h / 2], vb, past)));
  }
  EXPECT_LT(worst, 1e-5);
}

// Causal key skipping (issue 63): chunks of queries skip the keys after their last query. Values, recorded
// rows and gradients equal the unskipped computation (same chunks, every key computed and masked); claiming
// one cached key fewer than the mask's (a visible key dropped from every chunk) must change the result.
TEST(Blocks, CausalSkippedKeysMatchUnskippedValuesRowsAndGradients) {
  at::AutoGradMode grad_on(true);  // the suite runs without autograd unless a test asks for it
  at::manual_seed(5);
  const int64_t B = 2, H = 4, Hkv = 2, T = 37, past = 5, S = past + T, Dh = 8;
  auto q = at::randn({B, H, T, Dh}), k = at::randn({B, Hkv, S, Dh}), v = at::randn({B, Hkv, S, Dh});
  for (auto* t : {&q, &k, &v}) t->set_requires_grad(true);
  auto valid = at::ones({B, S}, at::kBool);
  valid[1].narrow(0, 0, 4).fill_(false);  // left padding: the skipping must keep masking it
  const auto mask = causal_mask(valid, T, past);
  const auto rows = at::tensor({0, 36, 17, 3, 20, 35}, at::kLong).view({B, 3});
  const int64_t budget = 6 * B * H * S * 4;  // chunks of 6 rows: 7 chunks, the last of 1
  const auto w = at::randn({B, T, H * Dh});  // a loss that weighs every output element differently
  const auto run = [&](int64_t causal_past, at::Tensor* probs) {
    for (auto* t : {&q, &k, &v})
      if (t->grad().defined()) t->mutable_grad().zero_();
    auto out = attention_in_chunks(q, k, v, mask, rows, probs, budget, causal_past);
    ((out * w).sum() + (probs->defined() ? (*probs * 0.5).sum() : at::zeros({}))).backward();
    return std::vector<at::Tensor>{out.detach(), q.grad().clone(), k.grad().clone(), v.grad().clone()};
  };
  at::Tensor p_full, p_skip, p_drop;
  const auto full = run(-1, &p_full);
  const auto skip = run(past, &p_skip);
  const char* what[] = {"output", "dq", "dk", "dv"};
  for (size_t i = 0; i < full.size(); ++i) EXPECT_LT(max_diff(skip[i], full[i]), 1e-5) << what[i];
  EXPECT_LT(max_diff(p_skip, p_full), 1e-7);
  ASSERT_EQ(p_skip.sizes(), (at::IntArrayRef{B, H, 3, S}));
  // Against the loops too (not only the unskipped path of the same function).
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<bool> vb(S);
    for (int64_t s = 0; s < S; ++s) vb[s] = valid[b][s].item<bool>();
    for (int64_t h = 0; h < H; ++h)
      worst = std::max(worst, max_diff(skip[0].view({B, T, H, Dh}).select(0, b).select(1, h),
                                       ref::attention_head(q[b][h].detach(), k[b][h / 2].detach(),
                                                           v[b][h / 2].detach(), vb, past)));
  }
  EXPECT_LT(worst, 1e-5);
  const auto drop = run(past - 1, &p_drop);  // each chunk's last query loses its newest visible key
  EXPECT_GT(max_diff(drop[0], full[0]), 1e-3);
  EXPECT_GT(max_diff(drop[2], full[2]), 1e-3);
  // A sequence short enough for one chunk runs as one block whatever causal_past says.
  EXPECT_EQ(causal_query_chunk(1, 6, 300, 300), 300);
  EXPECT_EQ(causal_query_chunk(1, 6, 3000, 3000), kCausalChunkRows);
}

TEST(Blocks, CausalMaskHidesFutureAndPadding) {
  auto valid = at::tensor({0, 1, 1, 1}).to(at::kBool).view({1, 4});
  auto m = causal_mask(valid, 2, 2).view({2, 4});
  // query 0 sits at cache index 2: sees keys 1, 2 (key 0 is padding, key 3 is in its future).
  const float hidden = std::numeric_limits<float>::lowest();
  EXPECT_EQ(m[0][0].item<float>(), hidden);
  EXPECT_EQ(m[0][1].item<float>(), 0.0f);
  EXPECT_EQ(m[0][2].item<float>(), 0.0f);
  EXPECT_EQ(m[0][3].item<float>(), hidden);
  EXPECT_EQ(m[1][3].item<float>(), 0.0f);
}

TEST(Blocks, QuickGeluIsClipFormula) {
  auto x = at::linspace(-4, 4, 17);
  auto expect = x / (1 + at::exp(-1.702 * x));
  EXPECT_LT(max_diff(activation(x, "quick_gelu"), expect), 1e-6);
  EXPECT_THROW(activation(x, "swish2"), std::exception);
}

}  // namespace
}  // namespace vispco
