// The plan front door (prune/bound_plan.h): every spelling of "no pruning" is unpruned, a stage without
// layer= takes its scorer's registry default, keys are what eval stored results under, and a gate or K
// predictor is read once at bind time (the files may vanish afterwards and every hook and prediction still
// works).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/errors.h"
#include "core/hash.h"
#include "model/llava/presets.h"
#include "prune/auto_keep/k_features.h"
#include "prune/bound_plan.h"
#include "prune/gate.h"
#include "prune/plan_hook.h"
#include "test_util.h"

namespace vispco {
namespace {

const ModelShape tiny() { return preset_shape("tiny", 0); }  // 4 decoder layers, N_v = 16

TEST(BoundPlan, EverySpellingOfNoneIsUnprunedEverywhere) {
  for (const std::string text : {"none", "NONE", "None", " none ", "", " \t"}) {
    const BoundPlan b = BoundPlan::bind(text, tiny(), ScorerEnv{});
    EXPECT_TRUE(b.unpruned()) << "'" << text << "'";
    EXPECT_FALSE(b.is_auto());
    EXPECT_EQ(b.text(), "none");
    EXPECT_EQ(b.key(), "none");
    EXPECT_EQ(b.hook(), nullptr);
    EXPECT_EQ(canonical_plan_text(text, tiny()), "none");
  }
  EXPECT_TRUE(BoundPlan().unpruned());
  EXPECT_EQ(BoundPlan().key(), "none");
  EXPECT_THROW(BoundPlan::bind("nonesuch:keep=4", tiny(), ScorerEnv{}), InvalidArgument);
}

TEST(BoundPlan, LayerDefaultsComeFromTheScorerRegistry) {
  for (const auto& e : scorer_registry()) {
    const auto plan = parse_plan(e.name + ":keep=4", tiny());
    EXPECT_EQ(plan.stages.at(0).layer, e.default_layer) << e.name;
  }
  EXPECT_EQ(BoundPlan::bind("fastv:keep=4", tiny(), ScorerEnv{}).text(), "fastv:layer=2,keep=4");
  EXPECT_EQ(BoundPlan::bind("dart:keep=4", tiny(), ScorerEnv{}).text(), "dart:layer=2,keep=4");
  EXPECT_EQ(BoundPlan::bind("divprune:keep=4", tiny(), ScorerEnv{}).text(), "divprune:layer=0,keep=4");
  EXPECT_EQ(default_layer("sparsevlm"), 2);
  EXPECT_THROW(default_layer("nosuch"), InvalidArgument);
}

TEST(BoundPlan, CanonicalTextKeyAndHookOfAStaticPlan) {
  const std::string text = " divprune:keep=0008+fastv:layer=2,keep=4 ";
  const BoundPlan b = BoundPlan::bind(text, tiny(), ScorerEnv{});
  EXPECT_EQ(b.text(), "divprune:layer=0,keep=8+fastv:layer=2,keep=4");
  EXPECT_EQ(b.key(), b.text()) << "no scorer read a file: the key is the canonical text";
  EXPECT_EQ(canonical_plan_text(text, tiny()), b.text());
  EXPECT_EQ(b.plan(), parse_plan(b.text(), tiny()));
  const auto h1 = b.hook(1), h2 = b.hook(2);
  ASSERT_NE(h1, nullptr);
  EXPECT_NE(h1.get(), h2.get()) << "a fresh hook per call";
  EXPECT_EQ(h1->plan(), b.plan());
  EXPECT_THROW(b.auto_keep(), InvalidArgument);
  EXPECT_THROW(b.at_keep(4), InvalidArgument);
  EXPECT_THROW(BoundPlan::bind("fastv:layer=9,keep=4", tiny(), ScorerEnv{}), InvalidArgument);
  EXPECT_THROW(BoundPlan::bind("fastv:layer=1,keep=99", tiny(), ScorerEnv{}), InvalidArgument);
}

TEST(BoundPlan, AGateFileIsReadAndHashedOnceAtBind) {
  const ModelShape shape = tiny();
  testing::TempDir tmp;
  const ScorerEnv env{tmp.str("")};
  const std::string path = default_gate_path(env.model_dir);
  GateConfig gc;
  gc.d_model = shape.hidden_size;
  gc.hidden = 8;
  TokenGate gate(gc, 1);
  save_gate(path, gate);
  const std::string hash = sha256_file_hex(path).substr(0, 16);
  const BoundPlan b = BoundPlan::bind("gate:keep=4", shape, env);
  EXPECT_EQ(b.key(), "gate:layer=0,keep=4 @gate=sha256:" + hash);
  std::filesystem::remove(path);
  EXPECT_NE(b.hook(0), nullptr) << "the hook shares the bound scorer: nothing is read again";
  EXPECT_EQ(BoundPlan(b).key(), b.key());
  EXPECT_THROW(BoundPlan::bind("gate:keep=4", shape, env), IoError) << "a fresh bind reads the (gone) file";
}

KPredictor write_predictor(const std::string& path, const ModelShape& shape) {
  KPredictorMeta m;
  m.template_text = "divprune:layer=0";
  m.ladder = {4, 8, shape.n_visual_tokens};
  m.n_features = k_feature_width(shape);
  m.hidden = 8;
  m.features = kKFeatureRecipe;
  KPredictor p(m, 5);
  save_k_predictor(path, p);
  return p;
}

TEST(BoundPlan, KeepAutoLoadsItsPredictorOnceAndBindsEveryRung) {
  const ModelShape shape = tiny();
  testing::TempDir tmp;
  const ScorerEnv env{tmp.str("")};
  KPredictor reference = write_predictor(default_k_predictor_path(env.model_dir), shape);
  const BoundPlan b = BoundPlan::bind("divprune:keep=auto", shape, env);
  std::filesystem::remove(default_k_predictor_path(env.model_dir));  // read once: not needed any more
  EXPECT_TRUE(b.is_auto());
  EXPECT_FALSE(b.unpruned());
  EXPECT_EQ(b.text(), "divprune:layer=0,keep=auto");
  EXPECT_EQ(b.key(), b.text());
  EXPECT_EQ(canonical_plan_text("divprune:keep=auto", shape), b.text());
  EXPECT_EQ(b.auto_keep().template_text, "divprune:layer=0");
  EXPECT_EQ(b.predictor_meta().ladder, (std::vector<int64_t>{4, 8, 16}));
  EXPECT_THROW(b.hook(), InvalidArgument) << "a keep=auto plan runs the static plan at its K";

  EXPECT_EQ(b.at_keep(4).text(), "divprune:layer=0,keep=4");
  EXPECT_EQ(b.at_keep(8).key(), "divprune:layer=0,keep=8");
  EXPECT_TRUE(b.at_keep(16).unpruned()) << "K = N_v runs unpruned";
  EXPECT_EQ(b.at_keep(6).text(), "divprune:layer=0,keep=6") << "off the ladder: bound on demand";

  torch::manual_seed(0);
  const auto features = torch::randn({5, k_feature_width(shape)});
  const auto keeps = b.predict_keep(features);
  const auto rungs = reference->predict(features);
  ASSERT_EQ(keeps.size(), 5u);
  for (size_t i = 0; i < keeps.size(); ++i) EXPECT_EQ(keeps[i], reference->meta.ladder.at(rungs[i])) << i;
  EXPECT_ANY_THROW(b.predict_keep(torch::randn({1, 3}))) << "wrong feature width";

  EXPECT_THROW(BoundPlan::bind("divprune:keep=auto", shape, env), IoError) << "the file is gone now";
  EXPECT_THROW(BoundPlan::bind("fastv:keep=auto:file=" + tmp / "nope.safetensors", shape, env), IoError);
}

}  // namespace
}  // namespace vispco
