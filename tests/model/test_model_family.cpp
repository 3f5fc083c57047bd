// Issue 44's seam, shown with a second family that lives in the tests (model/linear_projector_family.h):
// the registry finds it by config.json's architecture, and generation, evaluation, a search and the server
// take it through VisionLanguageModel and ModelShape alone. Its outputs are checked against the LLaVA family
// run on the same tower and decoder weights with the visual tokens computed here by hand (features · Wᵀ + b).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/errors.h"
#include "eval/eval_fixture.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/family_checks.h"
#include "model/generate.h"
#include "model/linear_projector_family.h"
#include "model/llava/llava.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

VisionLanguageModel load_family_model() {
  return VisionLanguageModel::load(testing::linear_projector_model_dir(), RunContext{});
}

// The family's visual tokens computed independently: the LLaVA tiny model's tower features (same weights)
// times the projector tensors read from the family's checkpoint file.
at::Tensor expected_visual(VisionLanguageModel& llava, const at::Tensor& pixels) {
  const auto file = io::SafetensorsFile::open(testing::linear_projector_model_dir() + "/model.safetensors");
  const auto w = file.tensor("multi_modal_projector.weight").to(at::kFloat);
  const auto b = file.tensor("multi_modal_projector.bias").to(at::kFloat);
  const auto& cfg = llava.config();
  at::NoGradGuard no_grad;
  const auto feats = llava.net()
                         ->vision_tower
                         ->forward(pixels.unsqueeze(0), cfg.n_vision_layers_used(),
                                   cfg.vision_feature_select_strategy == "default")
                         .features;                  // [1, N_v, D_v]
  return (at::matmul(feats, w.t()) + b).squeeze(0);  // [N_v, D]
}

TEST(ModelFamily, TheRegistryFindsTheFamilyByItsArchitecture) {
  testing::register_linear_projector_family();
  const ModelShape s = load_model_shape(testing::linear_projector_model_dir());
  EXPECT_EQ(s.architecture, testing::kLinearProjectorArchitecture);
  const ModelShape llava = load_model_shape(testing::tiny_model_dir());
  EXPECT_EQ(llava.architecture, "LlavaForConditionalGeneration");
  // tiny preset: N_v = 16, D_v = 32, D = 64 (model/llava/presets.cpp). One Linear: 2·N_v·D_v·D = 2·16·32·64.
  EXPECT_EQ(s.n_visual_tokens, 16);
  EXPECT_EQ(s.flops.projector, 2 * 16 * 32 * 64);
  // LLaVA's two layers: 2·N_v·(D_v·D + D·D) = 2·16·(32·64 + 64·64).
  EXPECT_EQ(llava.flops.projector, 2 * 16 * (32 * 64 + 64 * 64));
  EXPECT_EQ(s.flops.decoder, llava.flops.decoder);

  EXPECT_THROW(register_model_family(model_families().front()), InvalidArgument);  // already registered
  testing::TempDir tmp;
  fs::create_directories(tmp.path() / "m");
  testing::write_file(tmp.path() / "m" / "config.json",
                      R"({"architectures": ["Idefics3ForConditionalGeneration"]})");
  try {
    load_model_shape(tmp.str("m"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Idefics3ForConditionalGeneration"), std::string::npos) << msg;
    EXPECT_NE(msg.find("LlavaForConditionalGeneration"), std::string::npos) << msg;  // what it reads
    EXPECT_NE(msg.find(testing::kLinearProjectorArchitecture), std::string::npos) << msg;
  }
}

TEST(ModelFamily, EncodesWithItsOwnProjectorAndGeneratesAsTheDecoderDoesOnThoseTokens) {
  auto fam = load_family_model();
  auto llava = testing::load_tiny();
  ASSERT_THROW(fam.config(), ConfigError) << "not a LLaVA-1.5 model";
  const auto px = testing::test_pixels(56, 3);
  const auto want = expected_visual(llava, px);
  const auto got = fam.encode_images(px.unsqueeze(0)).embeds.squeeze(0);
  EXPECT_LT(testing::max_diff(got, want), 1e-5);

  GenerationConfig gc;
  gc.max_new_tokens = 6;
  for (const std::string plan : {"none", "divprune:keep=8", "fastv:layer=2,keep=4"}) {
    const auto ids = fam.prompt_ids("What colour is the cube?");
    EXPECT_EQ(ids, llava.prompt_ids("What colour is the cube?"));
    PlanHook h1(parse_plan(plan, fam.shape()), fam.shape()),
        h2(parse_plan(plan, llava.shape()), llava.shape());
    const auto a = generate(fam, {{px, ids}}, gc, h1.plan().empty() ? nullptr : &h1);
    VlmRequest given{px, ids};
    given.visual.embeds = want;  // the LLaVA decoder on the family's visual tokens
    const auto b = generate(llava, {given}, gc, h2.plan().empty() ? nullptr : &h2);
    EXPECT_EQ(a.tokens, b.tokens) << plan;
    EXPECT_EQ(a.stats.n_visual_kept, plan == "none" ? 16 : plan == "divprune:keep=8" ? 8 : 4) << plan;
  }
}

// A 6-sample dataset whose answers are the family model's own unpruned greedy outputs.
struct FamilyDataset {
  testing::TempDir tmp;
  fs::path dir = tmp.path() / "ds";
  FamilyDataset() {
    auto m = load_family_model();
    testing::write_own_answers_dataset(m, dir, testing::write_noise_images(dir, 6), "f");
  }
};

TEST(ModelFamily, EvaluatesAndSearchesThroughTheSameCode) {
  const FamilyDataset fd;
  auto m = load_family_model();
  testing::expect_evaluates_and_searches(m, testing::linear_projector_model_dir(), fd.dir,
                                         "answers are the model's own, batched or not");
}

TEST(ModelFamily, ServesChatCompletionsAsGenerateAnswers) {
  testing::expect_serves_as_generate(load_family_model(), testing::linear_projector_model_dir(),
                                     testing::test_png(64, 5), "divprune:keep=8", 8);
}

}  // namespace
}  // namespace vispco
