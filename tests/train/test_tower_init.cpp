// Tower initialisations: the sin-cos position table against values computed here from MAE's formula, and the
// mimetic products W_q W_kᵀ ≈ I, W_o W_v ≈ −β·I measured on the initialised layers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/errors.h"
#include "model/llava/presets.h"
#include "train/micro_recipe.h"
#include "train/recipe.h"
#include "train/tower_init.h"

namespace vispco::train {
namespace {

TEST(TowerInit, SincosPositionsFollowTheTwoDimensionalFormula) {
  const auto cfg = find_preset("tiny").config;
  auto net = random_llava_net(cfg, 3, at::kFloat);
  auto& tower = net->vision_tower->vision_model;
  sincos_position_init(tower, 0.5);
  const int64_t D = cfg.vision.hidden_size, G = cfg.vision.grid(), F = D / 4;
  auto w = tower->position_embedding->weight.detach();
  ASSERT_EQ(w.size(0), 1 + G * G);
  EXPECT_EQ(w[0].abs().max().item<float>(), 0.0f);  // [CLS]
  // Patch in row 2, column 1; frequency k = 1: ω = 10000^(−1/F).
  const double om = std::pow(10000.0, -1.0 / F);
  auto row = w[1 + 2 * G + 1];
  EXPECT_NEAR(row[1].item<float>(), 0.5 * std::sin(2 * om), 1e-6);
  EXPECT_NEAR(row[F + 1].item<float>(), 0.5 * std::cos(2 * om), 1e-6);
  EXPECT_NEAR(row[2 * F + 1].item<float>(), 0.5 * std::sin(1 * om), 1e-6);
  EXPECT_NEAR(row[3 * F + 1].item<float>(), 0.5 * std::cos(1 * om), 1e-6);
  // Neighbours are more alike than distant patches (what makes mimetic attention local).
  auto sim = [&](int64_t a, int64_t b) { return at::dot(w[1 + a], w[1 + b]).item<double>(); };
  EXPECT_GT(sim(0, 1), sim(0, G - 1));
  EXPECT_GT(sim(0, G), sim(0, G * (G - 1)));
}

TEST(TowerInit, MimeticAttentionProducts) {
  auto cfg = find_preset("tiny").config;
  cfg.vision.hidden_size = 128;  // wide enough for the random products to concentrate
  cfg.vision.intermediate_size = 256;
  auto net = random_llava_net(cfg, 3, at::kFloat);
  auto& tower = net->vision_tower->vision_model;
  at::manual_seed(11);
  mimetic_tower_init(tower, 0.5);
  const int64_t D = cfg.vision.hidden_size;
  auto eye = at::eye(D);
  for (const auto& layer : *tower->layers) {
    auto& a = *layer->as<ClipEncoderLayerImpl>()->self_attn;
    auto qk = at::matmul(a.q_proj->weight.t(), a.k_proj->weight).detach();  // x_iᵀ (W_qᵀ W_k) x_j
    EXPECT_NEAR(qk.diagonal().mean().item<double>(), 1.0, 0.05);
    EXPECT_LT((qk - eye * qk.diagonal().mean()).abs().mean().item<double>(), 0.15);
    auto ov = at::matmul(a.out_proj->weight, a.v_proj->weight).detach();
    EXPECT_NEAR(ov.diagonal().mean().item<double>(), -0.5, 0.03);
    EXPECT_EQ(a.q_proj->bias.abs().max().item<float>(), 0.0f);
  }
}

TEST(TowerInit, RejectsBadArguments) {
  auto net = random_llava_net(find_preset("tiny").config, 3, at::kFloat);
  EXPECT_THROW(sincos_position_init(net->vision_tower->vision_model, 0.0), InvalidArgument);
  EXPECT_THROW(mimetic_tower_init(net->vision_tower->vision_model, -1.0), InvalidArgument);
}

TEST(TrainRecipe, TowerInitAndGlyphWeightRoundTripAndStayInTheVisionStage) {
  auto r = testing_micro::micro_recipe();
  r.vision.sincos_positions = 0.5;
  r.vision.mimetic_tower = true;
  r.vision.glyph_weight = 4;
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  auto j = to_json(r);
  j["vision"]["glyph_weight"] = 0;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j = to_json(r);
  j["vision"]["sincos_positions"] = -1;
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  for (const char* key : {"sincos_positions", "mimetic_tower", "glyph_weight"}) {
    j = to_json(r);
    j["decoder"][key] = key == std::string("mimetic_tower") ? nlohmann::json(true) : nlohmann::json(2.0);
    EXPECT_THROW(recipe_from_json(j), InvalidArgument) << key;
  }
}

}  // namespace
}  // namespace vispco::train
