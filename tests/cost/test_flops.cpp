// Tests of the FLOPs model (cost/flops.h, and LLaVA's spec of it in model/llava/llava_shape.h) against values
// worked out by hand in the comments (multiply–add = 2 FLOPs), never by calling the code under test, plus a
// ballpark check at LLaVA-1.5-7B dimensions.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/flops.h"
#include "model/llava/llava_shape.h"
#include "model/llava/presets.h"

namespace vispco {
namespace {

// A small config: text D = 8, m = 16, H = 2, H_kv = 1 (so D_h = 8 / 2 = 4), L = 2, V = 10;
// vision D_v = 4, m_v = 8, 3 layers of which 2 are used (feature layer −2), 4 px image of 2 px patches
// (grid 2, 4 patches + [CLS] = 5 tokens), 3 channels.
LlavaConfig small_config() {
  LlavaConfig c;
  c.text.hidden_size = 8;
  c.text.intermediate_size = 16;
  c.text.num_hidden_layers = 2;
  c.text.num_attention_heads = 2;
  c.text.num_key_value_heads = 1;
  c.text.vocab_size = 10;
  c.vision.hidden_size = 4;
  c.vision.intermediate_size = 8;
  c.vision.num_hidden_layers = 3;
  c.vision.num_attention_heads = 2;
  c.vision.image_size = 4;
  c.vision.patch_size = 2;
  c.vision.num_channels = 3;
  c.vision_feature_layer = -2;
  return c;
}

// The decoder of small_config() written out by hand (D_h = D / H = 4, H_kv = 1).
DecoderFlopsSpec small_decoder() {
  return {.hidden_size = 8,
          .intermediate_size = 16,
          .num_layers = 2,
          .num_heads = 2,
          .num_kv_heads = 1,
          .head_dim = 4,
          .vocab_size = 10};
}

// small_config() as the FLOPs model sees it (LLaVA's per-image encoder parts from model/llava/llava_shape.h).
FlopsSpec small_spec() { return llava_flops_spec(small_config()); }

TEST(Flops, LlavaSpecCarriesTheDecoderDimensions) {
  EXPECT_EQ(small_spec().decoder, small_decoder());
  EXPECT_EQ(small_spec().n_visual_tokens, 4);
}

TEST(Flops, DecoderLayerPrefillByHand) {
  const auto f = decoder_layer_flops(small_decoder(), 3, 3);
  // q, o: 2·n·D·(H·D_h) = 2·3·8·8 = 384 each; k, v: 2·3·8·(1·4) = 192 each → 384+384+192+192 = 1152.
  EXPECT_EQ(f.projections, 1152);
  // QKᵀ and P·V: 2·2·n·S·H·D_h = 4·3·3·8 = 288 (no causal halving).
  EXPECT_EQ(f.attention, 288);
  // SwiGLU: 2·3·n·D·m = 6·3·8·16 = 2304.
  EXPECT_EQ(f.mlp, 2304);
  EXPECT_EQ(f.total(), 1152 + 288 + 2304);  // 3744
  EXPECT_EQ(f.n_tokens, 3);
  EXPECT_EQ(f.n_keys, 3);
}

TEST(Flops, VisionLayerByHand) {
  // n = 5, D_v = 4, m_v = 8: projections 4·2·5·4·4 = 640, attention 2·2·25·4 = 400, MLP 2·2·5·4·8 = 640.
  EXPECT_EQ(vision_layer_flops(4, 8, 5), 640 + 400 + 640);  // 1680
}

TEST(Flops, PrefillBreakdownByHandWithPrunedLayer) {
  // Layer 0 at 3 tokens (3744, see DecoderLayerPrefillByHand); layer 1 at 2 tokens:
  // q, o 2·2·8·8 = 256 each, k, v 2·2·8·4 = 128 each → 768; attention 4·2·2·8 = 128; MLP 6·2·8·16 = 1536
  // → 2432.
  const auto f = prefill_flops(small_spec(), {3, 2});
  // Patch conv: 2 · 4 patches · D_v 4 · (3 channels · 2 · 2) = 384. Two used layers at 5 tokens: 2·1680 =
  // 3360.
  EXPECT_EQ(f.vision_patch_embed, 384);
  EXPECT_EQ(f.vision_layers, 3360);
  EXPECT_EQ(f.vision, 3744);
  // Projector at N_v = 4 ("default" drops [CLS]): 2·4·4·8 = 256 (linear_1) + 2·4·8·8 = 512 (linear_2).
  EXPECT_EQ(f.projector, 768);
  ASSERT_EQ(f.decoder.size(), 2u);
  EXPECT_EQ(f.decoder[0].total(), 3744);
  EXPECT_EQ(f.decoder[1].projections, 768);
  EXPECT_EQ(f.decoder[1].attention, 128);
  EXPECT_EQ(f.decoder[1].mlp, 1536);
  EXPECT_EQ(f.decoder_total, 3744 + 2432);  // 6176
  // LM head at the last position only: 2·1·8·10 = 160.
  EXPECT_EQ(f.lm_head, 160);
  EXPECT_EQ(f.total, 3744 + 768 + 6176 + 160);  // 10848
  EXPECT_EQ(f.to_json()["total"].get<int64_t>(), 10848);
  EXPECT_EQ(f.to_json()["decoder"][1]["total"].get<int64_t>(), 2432);

  // LM head on all 2 positions of the last layer: 2·2·8·10 = 320.
  const auto all = prefill_flops(small_spec(), {3, 2}, {.lm_head_all_positions = true});
  EXPECT_EQ(all.lm_head, 320);
  EXPECT_EQ(all.total, 10848 - 160 + 320);
}

TEST(Flops, FullSelectStrategyKeepsClsInProjector) {
  auto c = small_config();
  c.vision_feature_select_strategy = "full";
  // N_v = 5: 2·5·4·8 = 320 + 2·5·8·8 = 640. The tower itself is unchanged (always grid² + 1 tokens).
  const auto f = prefill_flops(llava_flops_spec(c), {3, 3});
  EXPECT_EQ(f.projector, 960);
  EXPECT_EQ(f.vision, 3744);
}

TEST(Flops, UnprunedTokensPerLayer) {
  // N_v = 2² = 4 visual tokens + 7 text tokens, for both layers.
  EXPECT_EQ(unpruned_tokens_per_layer(small_spec(), 7), (std::vector<int64_t>{11, 11}));
}

TEST(Flops, DecodeStepByHand) {
  // Layer 0 holds 5 cached positions: S = 6. q, o 2·1·8·8 = 128 each, k, v 2·1·8·4 = 64 each → 384;
  // attention 4·1·6·8 = 192; MLP 6·1·8·16 = 768 → 1344.
  // Layer 1 (pruned) holds 2: S = 3, attention 4·1·3·8 = 96 → 384 + 96 + 768 = 1248. LM head 2·8·10 = 160.
  const auto f = decode_step_flops(small_spec(), {5, 2});
  ASSERT_EQ(f.decoder.size(), 2u);
  EXPECT_EQ(f.decoder[0].n_keys, 6);
  EXPECT_EQ(f.decoder[0].total(), 1344);
  EXPECT_EQ(f.decoder[1].attention, 96);
  EXPECT_EQ(f.decoder[1].total(), 1248);
  EXPECT_EQ(f.decoder_total, 2592);
  EXPECT_EQ(f.lm_head, 160);
  EXPECT_EQ(f.total, 2752);
}

TEST(Flops, SimplifiedFastVFormulaByHand) {
  // 4nd² + 2n²d + 2ndm with n = 3, d = 8, m = 16: 4·3·64 = 768, 2·9·8 = 144, 2·3·8·16 = 768.
  EXPECT_EQ(simplified_layer_flops(3, 8, 16), 1680);
  // n = 2: 4·2·64 = 512, 2·4·8 = 64, 2·2·8·16 = 512 → 1088; the two layers: 1680 + 1088.
  EXPECT_EQ(simplified_decoder_flops(small_decoder(), {3, 2}), 2768);
}

TEST(Flops, RejectsBadCounts) {
  const auto c = small_spec();
  EXPECT_THROW(prefill_flops(c, {3}), InvalidArgument);     // L = 2 entries expected
  EXPECT_THROW(prefill_flops(c, {3, 0}), InvalidArgument);  // a layer with no token
  EXPECT_THROW(decode_step_flops(c, {5, -1}), InvalidArgument);
  EXPECT_THROW(decoder_layer_flops(c.decoder, 4, 3), InvalidArgument);  // fewer keys than queries
  EXPECT_THROW(simplified_layer_flops(0, 8, 16), InvalidArgument);
  EXPECT_THROW(unpruned_tokens_per_layer(c, -1), InvalidArgument);
  try {
    prefill_flops(c, {3, 0});
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tokens_per_layer[1]"), std::string::npos) << e.what();
  }
}

TEST(Flops, Llava7bDecoderPrefillBallpark) {
  // Rule of thumb: a dense forward costs one multiply–add (2 FLOPs) per weight per token. Vicuna-7B has
  // ≈ 6.7e9 weights, so 616 tokens (576 visual + 40 text) cost ≈ 2 · 6.7e9 · 616 = 8.25e12 FLOPs.
  // Finer: the 32 layers hold 32·(4·4096² + 3·4096·11008) = 6.48e9 weights (the other 0.26e9 are the
  // embedding table, a lookup, and the LM head, run at one position); attention scores add
  // 32 · 4·616²·4096 = 0.20e12. Per layer, worked out on a calculator:
  //   projections 8·616·4096²       =  82,678,120,448
  //   attention   4·616²·4096       =   6,217,007,104
  //   SwiGLU      6·616·4096·11008  = 166,648,086,528   → 255,543,214,080; × 32 = 8,177,382,850,560.
  const auto cfg = llava_flops_spec(find_preset("llava-1.5-7b").config);
  const auto f = prefill_flops(cfg, unpruned_tokens_per_layer(cfg, 40));
  ASSERT_EQ(f.decoder.size(), 32u);
  EXPECT_EQ(f.decoder[0].n_tokens, 616);
  EXPECT_EQ(f.decoder[0].total(), 255'543'214'080);
  EXPECT_EQ(f.decoder_total, 8'177'382'850'560);
  const double rule_of_thumb = 2.0 * 6.7e9 * 616;  // 8.2544e12
  EXPECT_NEAR(static_cast<double>(f.decoder_total), rule_of_thumb, 0.10 * rule_of_thumb);
  // LM head at one position: 2·4096·32064 = 262,668,288.
  EXPECT_EQ(f.lm_head, 262'668'288);
  // CLIP ViT-L/336: 23 of 24 layers at 577 tokens, each 8·577·1024² + 4·577²·1024 + 4·577·1024·4096
  // = 15,884,357,632 → 365,340,225,536; patch conv 2·576·1024·(3·14·14) = 693,633,024.
  EXPECT_EQ(f.vision_layers, 365'340'225'536);
  EXPECT_EQ(f.vision_patch_embed, 693'633'024);
  // Visual tokens are the bulk of the prefill (DESIGN.md §1): with 40 text tokens, > 90% of decoder FLOPs
  // scale with the 576 visual ones.
  const auto text_only = prefill_flops(cfg, std::vector<int64_t>(32, 40));
  EXPECT_LT(static_cast<double>(text_only.decoder_total), 0.10 * static_cast<double>(f.decoder_total));
}

}  // namespace
}  // namespace vispco
