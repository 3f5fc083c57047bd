// The Qwen towers' VisionZip signal helpers (model/qwen2_vl/vision_received.h) on hand-worked inputs: the
// attention each key receives (uniform and two-key softmaxes by hand; chunked == one naive [H, N, N] softmax
// per segment), and the patch → merged-token mapping (4 consecutive patches of the merge-blocked order = one
// merged token; Qwen2.5-VL's window order put back).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "model/qwen2_vl/vision_layout.h"
#include "model/qwen2_vl/vision_received.h"

namespace vispco {
namespace {

std::vector<float> as_floats(const at::Tensor& t) {
  auto c = t.to(at::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

TEST(QwenVisionReceived, UniformQueriesSpreadOneOverEachSegment) {
  // q = 0: every query attends uniformly inside its segment, so each key of a segment of L gets 1/L.
  const auto q = at::zeros({5, 2, 4}), k = at::randn({5, 2, 4});
  const auto r = as_floats(received_attention(q, k, {2, 3}));
  const std::vector<float> want{0.5f, 0.5f, 1 / 3.f, 1 / 3.f, 1 / 3.f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r[i], want[i], 1e-7) << i;
}

TEST(QwenVisionReceived, TwoKeysByHand) {
  // One head, D_h = 1, both queries 1, keys ln 3 and 0: softmax(ln 3, 0) = (3/4, 1/4) for each query.
  const auto q = at::ones({2, 1, 1});
  const auto k = at::tensor({std::log(3.f), 0.f}).view({2, 1, 1});
  const auto r = as_floats(received_attention(q, k, {2}));
  EXPECT_NEAR(r[0], 0.75f, 1e-7);
  EXPECT_NEAR(r[1], 0.25f, 1e-7);
  EXPECT_THROW(received_attention(q, k, {1}), c10::Error);  // lengths must sum to N
}

TEST(QwenVisionReceived, ChunkedEqualsTheNaiveSoftmaxPerSegment) {
  const int64_t N = 37, H = 3, Dh = 8;
  const std::vector<int64_t> lengths{16, 16, 5};
  const auto q = at::randn({N, H, Dh}, at::kDouble), k = at::randn({N, H, Dh}, at::kDouble);
  std::vector<at::Tensor> parts;  // naive: the full [H, L, L] softmax of each segment, head mean, column mean
  int64_t start = 0;
  for (const auto len : lengths) {
    auto qs = q.narrow(0, start, len).transpose(0, 1), ks = k.narrow(0, start, len).transpose(0, 1);
    auto probs = (at::matmul(qs, ks.transpose(1, 2)) / std::sqrt(double(Dh))).softmax(-1);  // [H, L, L]
    parts.push_back(probs.mean(0).mean(0));
    start += len;
  }
  const auto want = at::cat(parts);
  // One query row per chunk (budget of one row's scores), and the default budget (one chunk).
  for (const int64_t budget : {int64_t(1), kAttentionScoreBudgetBytes}) {
    const auto got = received_attention(q, k, lengths, budget).to(at::kDouble);
    const double diff = (got - want).abs().max().item<double>();
    std::printf("budget %lld bytes: max |chunked − naive| %.2e\n", static_cast<long long>(budget), diff);
    EXPECT_LT(diff, 1e-6);
  }
}

TEST(QwenVisionReceived, FourConsecutivePatchesMakeOneMergedToken) {
  // A 4×4 patch grid, m = 2, patches in merge-blocked order; value = 10·row + col. Merged token (0,0) holds
  // patches (0,0) (0,1) (1,0) (1,1): (0 + 1 + 10 + 11) / 4 = 5.5; (0,1): (2 + 3 + 12 + 13) / 4 = 7.5;
  // (1,0): 25.5; (1,1): 27.5.
  const auto pos = qwen_patch_positions(1, 4, 4, 2);
  const auto value = (pos.select(1, 0) * 10 + pos.select(1, 1)).to(at::kFloat);  // [16]
  EXPECT_EQ(as_floats(qwen_merged_token_mean(value, 4, {})), (std::vector<float>{5.5f, 7.5f, 25.5f, 27.5f}));
  // Rows of more than one column ([N_p, E] keys) are averaged the same way, column by column.
  const auto keys = at::stack({value, -value}, 1);  // [16, 2]
  EXPECT_EQ(as_floats(qwen_merged_token_mean(keys, 4, {})),
            (std::vector<float>{5.5f, -5.5f, 7.5f, -7.5f, 25.5f, -25.5f, 27.5f, -27.5f}));
  EXPECT_THROW(qwen_merged_token_mean(value.narrow(0, 0, 6), 4, {}), c10::Error);
}

TEST(QwenVisionReceived, WindowOrderIsPutBackToTheMergedGrid) {
  // A 4×8 patch grid (2 × 4 merged tokens), windows of 2 × 2 merged tokens: order = 0 1 4 5 | 2 3 6 7.
  const auto win = qwen_window_index(1, 4, 8, 2, 2);
  ASSERT_EQ(win.order.numel(), 8);
  // Patches as the windowed blocks see them: merged token order[i]'s 4 patches at 4i … 4i + 3.
  const auto patch_order = (win.order.unsqueeze(1) * 4 + at::arange(4, at::kLong)).view(-1);
  const auto pos = qwen_patch_positions(1, 4, 8, 2).index_select(0, patch_order);
  const auto value = (pos.select(1, 0) * 10 + pos.select(1, 1)).to(at::kFloat);
  // Merged token (r, c) in grid row-major order: mean of rows 2r, 2r+1 and columns 2c, 2c+1 = 10(2r + ½) +
  // 2c + ½.
  EXPECT_EQ(as_floats(qwen_merged_token_mean(value, 4, win.order)),
            (std::vector<float>{5.5f, 7.5f, 9.5f, 11.5f, 25.5f, 27.5f, 29.5f, 31.5f}));
  EXPECT_EQ(as_floats(qwen_merged_grid_order(at::arange(8).to(at::kFloat), win.order)),
            (std::vector<float>{0, 1, 4, 5, 2, 3, 6, 7}));  // out[order[i]] = i: order 0 1 4 5 2 3 6 7
}

}  // namespace
}  // namespace vispco
