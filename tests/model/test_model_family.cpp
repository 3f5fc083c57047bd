// Issue 44's seam, shown with a second family that lives in the tests (model/linear_projector_family.h):
// the registry finds it by config.json's architecture, and generation, evaluation, a search and the server
// take it through VisionLanguageModel and ModelShape alone. Its outputs are checked against the LLaVA family
// run on the same tower and decoder weights with the visual tokens computed here by hand (features · Wᵀ + b).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/eval_fixture.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/linear_projector_family.h"
#include "model/llava/llava.h"
#include "optimize/min_k.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plan_template.h"
#include "prune/plan_hook.h"
#include "serve/server_fixture.h"

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
                      R"({"architectures": ["Qwen2VLForConditionalGeneration"]})");
  try {
    load_model_shape(tmp.str("m"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Qwen2VLForConditionalGeneration"), std::string::npos) << msg;
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
    const auto images = testing::write_noise_images(dir, 6);
    std::ofstream out(dir / "data.jsonl");
    for (int i = 0; i < 6; ++i) {
      const std::string q = testing::test_question(i);
      VlmRequest req{m.preprocess(io::load_image_rgb((dir / images[i]).string())), m.prompt_ids(q)};
      const auto answer = generate(m, {req}, eval::default_eval_generation()).texts[0];
      out << nlohmann::json{{"id", "f" + std::to_string(i)},
                            {"image", images[i]},
                            {"question", q},
                            {"answer", answer},
                            {"family", i % 2 ? "x" : "y"}}
                 .dump()
          << "\n";
    }
  }
};

TEST(ModelFamily, EvaluatesAndSearchesThroughTheSameCode) {
  const FamilyDataset fd;
  auto m = load_family_model();
  const auto hash = eval::model_folder_hash(testing::linear_projector_model_dir());
  const auto ds = eval::load_dataset(fd.dir.string());
  testing::TempDir tmp;
  eval::EvalOptions o;
  o.store_path = tmp.str("store.sqlite");
  o.batch_size = 3;
  const auto none = eval::evaluate_plan(m, hash, ds, o, PruningPlan{}, ScorerEnv{});
  EXPECT_EQ(none.n_evaluated, 6u);
  EXPECT_DOUBLE_EQ(none.metrics.overall.accuracy(), 1.0) << "answers are the model's own, batched or not";
  const auto pruned =
      eval::evaluate_plan(m, hash, ds, o, parse_plan("divprune:keep=4", m.shape()), ScorerEnv{});
  EXPECT_DOUBLE_EQ(pruned.mean_n_visual_kept, 4.0);

  optimize::ModelEvalSettings st;
  st.store_path = o.store_path;
  st.batch_size = 3;
  optimize::ModelPlanEvaluator ev(m, hash, ds, ds, st);
  const auto t = optimize::PlanTemplate::parse("fastv:layer=2", m.shape());
  const auto ref = ev.evaluate(PruningPlan{}, optimize::Split::kCalib);
  EXPECT_EQ(ref.n_from_store, 6u) << "the unpruned results above, found under the same keys";
  optimize::MinKOptions mk;
  mk.k_min = 1;
  mk.k_max = 16;
  mk.epsilon = 0.0;
  const auto r = optimize::min_k_search(
      [&](int64_t k) { return ev.evaluate(t.at(k), optimize::Split::kCalib, t.text(), k).accuracy; },
      ref.accuracy, mk);
  ASSERT_TRUE(r.chosen.has_value());
  EXPECT_DOUBLE_EQ(ev.evaluate(t.at(*r.chosen), optimize::Split::kCalib, t.text(), *r.chosen).accuracy, 1.0);
}

TEST(ModelFamily, ServesChatCompletionsAsGenerateAnswers) {
  testing::ServerFixture f(load_family_model(), testing::linear_projector_model_dir(), {}, {});
  auto c = f.client();
  const auto png = testing::test_png(64, 5);
  auto body = testing::chat_body("How many cubes?", png, 5);
  body["vispco"] = {{"plan", "divprune:keep=8"}};
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto r = nlohmann::json::parse(res->body);
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  auto& m = f.model();
  PlanHook hook(parse_plan("divprune:keep=8", m.shape()), m.shape());
  const auto want =
      generate(m, {{m.preprocess(io::decode_image_rgb(png)), m.prompt_ids("How many cubes?")}}, gc, &hook);
  EXPECT_EQ(r["choices"][0]["message"]["content"], want.texts[0]);
  EXPECT_EQ(r["vispco"]["kept_visual_tokens"], 8);
}

}  // namespace
}  // namespace vispco
