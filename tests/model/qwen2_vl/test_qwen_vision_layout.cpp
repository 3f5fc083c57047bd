// The vision tower's bookkeeping (model/qwen2_vl/vision_layout.h, vision_blocks.h segment_attention,
// vision_flops.h) on hand-worked grids: merge-blocked positions, 2-D rotary angles, Qwen2.5-VL's windows
// with partial ones at the right and bottom, attention inside segments against a per-segment loop, and the
// tower's FLOPs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "model/qwen2_vl/vision_blocks.h"
#include "model/qwen2_vl/vision_flops.h"
#include "model/qwen2_vl/vision_layout.h"

namespace vispco {
namespace {

std::vector<int64_t> as_vector(const at::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(QwenVisionLayout, PositionsFollowTheMergeBlockedOrder) {
  // A 4×4 patch grid, m = 2: block (0,0) = (0,0) (0,1) (1,0) (1,1), then block (0,1) = (0,2) (0,3) (1,2) ...
  const auto pos = qwen_patch_positions(1, 4, 4, 2);
  ASSERT_EQ(pos.sizes(), (at::IntArrayRef{16, 2}));
  EXPECT_EQ(as_vector(pos.select(1, 0)),
            (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  EXPECT_EQ(as_vector(pos.select(1, 1)),
            (std::vector<int64_t>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_EQ(qwen_patch_positions(2, 4, 4, 2).select(0, 16).equal(pos.select(0, 0)), true);  // frames repeat
  EXPECT_THROW(qwen_patch_positions(1, 5, 4, 2), InvalidArgument);
}

TEST(QwenVisionLayout, RotaryAnglesAreRowsThenColumns) {
  // D_h = 8: inv_freq over D_h/2 = 4 dims = [1, 10000^(-2/4) = 0.01] (built in fp32, as transformers:
  // 0.01f); patch (r, c) → [r, 0.01 r, c, 0.01 c].
  const auto pos = at::tensor(std::vector<int64_t>{3, 5}, at::kLong).view({1, 2});
  const auto a = qwen_vision_rotary_angles(pos, 8);
  ASSERT_EQ(a.sizes(), (at::IntArrayRef{1, 4}));
  EXPECT_EQ(a.scalar_type(), at::kDouble);
  const double f = double(0.01f);
  const double want[4] = {3, 3 * f, 5, 5 * f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[0][i].item<double>(), want[i], 1e-15) << i;
}

TEST(QwenVisionLayout, WindowsAreCutFromTheTopLeftWithPartialOnesAtTheEdges) {
  // 12×18 patches, m = 2 → 6×9 merged tokens; windows of 4: rows [0,4) [4,6), columns [0,4) [4,8) [8,9):
  // 16, 16, 4, 8, 8, 2 merged tokens = 64, 64, 16, 32, 32, 8 patches.
  const auto w = qwen_window_index(1, 12, 18, 2, 4);
  EXPECT_EQ(w.lengths, (std::vector<int64_t>{64, 64, 16, 32, 32, 8}));
  const auto order = as_vector(w.order);
  ASSERT_EQ(order.size(), 54u);
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.begin() + 16),
            (std::vector<int64_t>{0, 1, 2, 3, 9, 10, 11, 12, 18, 19, 20, 21, 27, 28, 29, 30}));
  EXPECT_EQ(std::vector<int64_t>(order.begin() + 32, order.begin() + 36),
            (std::vector<int64_t>{8, 17, 26, 35}));
  EXPECT_EQ(std::vector<int64_t>(order.begin() + 36, order.begin() + 44),
            (std::vector<int64_t>{36, 37, 38, 39, 45, 46, 47, 48}));
  EXPECT_EQ(std::vector<int64_t>(order.end() - 2, order.end()), (std::vector<int64_t>{44, 53}));
  // A grid that divides evenly has no empty window (transformers pads one and drops it).
  EXPECT_EQ(qwen_window_index(1, 8, 8, 2, 4).lengths, (std::vector<int64_t>{64}));
  EXPECT_EQ(qwen_window_index(2, 4, 8, 2, 4).lengths, (std::vector<int64_t>{32, 32}));  // a window per frame
}

TEST(QwenVisionLayout, SegmentAttentionEqualsAttentionInsideEachSegment) {
  at::manual_seed(7);
  const std::vector<int64_t> lengths{3, 5, 3, 2, 5};  // lengths repeat and alternate
  const int64_t N = 18, H = 2, Dh = 8;
  auto q = at::randn({N, H, Dh}), k = at::randn({N, H, Dh}), v = at::randn({N, H, Dh});
  const auto got = segment_attention(q, k, v, lengths);
  ASSERT_EQ(got.sizes(), (at::IntArrayRef{N, H * Dh}));
  // Naive: each segment on its own, softmax(q kᵀ / √D_h) v per head.
  std::vector<at::Tensor> parts;
  int64_t at0 = 0;
  for (auto n : lengths) {
    auto qs = q.narrow(0, at0, n).transpose(0, 1), ks = k.narrow(0, at0, n).transpose(0, 1),
         vs = v.narrow(0, at0, n).transpose(0, 1);  // [H, n, Dh]
    auto p = at::softmax(at::matmul(qs, ks.transpose(1, 2)) / std::sqrt(double(Dh)), -1);
    parts.push_back(at::matmul(p, vs).transpose(0, 1).reshape({n, H * Dh}));
    at0 += n;
  }
  const double diff = (got - at::cat(parts, 0)).abs().max().item<double>();
  std::printf("segment_attention vs per-segment loop: max |diff| %.2e\n", diff);
  EXPECT_LE(diff, 1e-6);
  EXPECT_THROW(segment_attention(q, k, v, {3, 5}), c10::Error);
}

TEST(QwenVisionFlops, CountsTheMatrixProductsOfBothTowers) {
  // Qwen2-VL tiny: E 32, 2 heads, MLP 64, D 64, depth 4, on 4×8 patches (N_p 32, N_v 8).
  Qwen2VisionConfig a;
  a.depth = 4;
  a.embed_dim = 32;
  a.num_heads = 2;
  a.intermediate_size = 64;
  a.out_hidden_size = 64;
  const auto fa = qwen_vision_flops(a, 1, 4, 8);
  EXPECT_EQ(fa.patch_embed, 2.0 * 32 * 1176 * 32);  // 2,408,448
  // qkv 2·32·32·96 + proj 2·32·32·32 + attention 4·32·32² + MLP 4·32·32·64 = 655,360 per block.
  ASSERT_EQ(fa.blocks.size(), 4u);
  EXPECT_EQ(fa.blocks[0], 655360.0);
  EXPECT_EQ(fa.merger, 2.0 * 8 * 128 * 128 + 2.0 * 8 * 128 * 64);  // 393,216
  EXPECT_EQ(fa.total(), 2408448.0 + 4 * 655360.0 + 393216.0);

  // Qwen2.5-VL tiny: E 32, MLP 48, windows of 4 merged tokens, full attention in blocks 1 and 3, on 12×18
  // patches (N_p 216): windows 64, 64, 16, 32, 32, 8 patches → Σ L² = 10,560; the whole frame 216² = 46,656.
  Qwen2VisionConfig b = a;
  b.arch = QwenVisionArch::kQwen25VL;
  b.intermediate_size = 48;
  b.window_size = 112;
  b.fullatt_block_indexes = {1, 3};
  b.hidden_act = "silu";
  const auto fb = qwen_vision_flops(b, 1, 12, 18);
  const double common = 2.0 * 216 * 32 * 96 + 2.0 * 216 * 32 * 32 + 6.0 * 216 * 32 * 48;  // qkv, proj, SwiGLU
  EXPECT_EQ(fb.blocks[0], common + 4.0 * 32 * 10560);
  EXPECT_EQ(fb.blocks[1], common + 4.0 * 32 * 46656);
  EXPECT_EQ(fb.full_attention, (std::vector<bool>{false, true, false, true}));
  EXPECT_LT(fb.blocks[2], fb.blocks[3]);
  EXPECT_THROW(qwen_vision_flops(b, 1, 13, 18), InvalidArgument);
}

}  // namespace
}  // namespace vispco
