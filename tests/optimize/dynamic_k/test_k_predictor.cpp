// The ordinal K predictor: training lowers its loss and learns a separable rule, the file round-trips, bad
// files and keep=auto plans give clear errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/errors.h"
#include "io/safetensors.h"
#include "model/llava/config.h"
#include "model/llava/presets.h"
#include "optimize/dynamic_k/k_predictor.h"
#include "prune/auto_keep/auto_keep.h"
#include "test_util.h"

namespace vispco::optimize {
namespace {

KPredictorMeta meta(int64_t n_features) {
  KPredictorMeta m;
  m.template_text = "divprune:layer=0";
  m.ladder = {2, 4, 8, 16};
  m.n_features = n_features;
  m.hidden = 16;
  m.features = "test";
  return m;
}

// 200 rows of 5 features; the label is the number of thresholds {-0.7, 0, 0.7} that feature 2 exceeds.
std::pair<at::Tensor, std::vector<int>> toy_data() {
  torch::manual_seed(3);
  auto x = torch::randn({200, 5});
  std::vector<int> y;
  for (int64_t i = 0; i < 200; ++i) {
    const double v = x[i][2].item<double>();
    y.push_back((v > -0.7) + (v > 0.0) + (v > 0.7));
  }
  return {x * 3.0 + 1.0, y};  // scaled and shifted: the feature statistics must undo it
}

TEST(KPredictor, TrainingLowersTheLossAndLearnsASeparableRule) {
  auto [x, y] = toy_data();
  KPredictor p(meta(5), 1);
  KPredictorTraining t;
  t.steps = 300;
  t.lr = 1e-2;
  const auto r = train_k_predictor(p, x, y, t);
  EXPECT_GT(r.loss_before, 0.5);
  EXPECT_LT(r.loss_after, 0.5 * r.loss_before);
  const auto rungs = p->predict(x, 0.5);
  int right = 0;
  for (size_t i = 0; i < y.size(); ++i) right += rungs[i] == y[i];
  EXPECT_GT(right, 170) << "of 200";
  // Lowering τ never removes tokens.
  const auto safer = p->predict(x, 0.1);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_GE(safer[i], rungs[i]);
  EXPECT_LE(p->n_parameters(), 100000);
}

TEST(KPredictor, EarlyStoppingKeepsTheBestHeldOutStep) {
  auto [x, y] = toy_data();
  std::vector<int> fit = y, held(y.size(), -1);
  for (size_t i = 0; i < y.size(); i += 4) std::swap(fit[i], held[i]);
  KPredictor p(meta(5), 1);
  KPredictorTraining t;
  t.steps = 200;
  t.lr = 1e-2;
  const auto r = train_k_predictor(p, x, fit, t, x, held);
  EXPECT_EQ(r.kept_step % 10, 0);
  EXPECT_NEAR(r.val_loss, k_predictor_loss(p, x, held), 1e-6)
      << "the kept weights are those of the best check";
  EXPECT_LT(r.val_loss, 0.6);
}

TEST(KPredictor, RoundTripsThroughItsFile) {
  auto [x, y] = toy_data();
  KPredictor p(meta(5), 2);
  KPredictorTraining t;
  t.steps = 50;
  train_k_predictor(p, x, y, t);
  p->meta.tau = 0.3;
  testing::TempDir tmp;
  save_k_predictor(tmp / "k.safetensors", p);
  auto q = load_k_predictor(tmp / "k.safetensors");
  EXPECT_EQ(q->meta, p->meta);
  torch::NoGradGuard g;
  EXPECT_EQ((q->logits(x) - p->logits(x)).abs().max().item<double>(), 0.0);
  EXPECT_EQ(q->predict(x), p->predict(x));
}

TEST(KPredictor, BadFilesGiveClearErrors) {
  testing::TempDir tmp;
  try {
    load_k_predictor(tmp / "none.safetensors");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no K predictor"), std::string::npos) << e.what();
  }
  io::save_safetensors(tmp / "other.safetensors", {{"w", torch::zeros({2})}}, {{"format", "vispco-gate"}});
  EXPECT_THROW(load_k_predictor(tmp / "other.safetensors"), FormatError);
  KPredictor p(meta(5));
  save_k_predictor(tmp / "k.safetensors", p);
  auto f = io::SafetensorsFile::open(tmp / "k.safetensors");
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, info] : f.entries()) tensors[name] = f.tensor(name).clone();
  tensors["fc1.weight"] = torch::zeros({3, 3});
  io::save_safetensors(tmp / "shape.safetensors", tensors, f.metadata());
  EXPECT_THROW(load_k_predictor(tmp / "shape.safetensors"), FormatError);
  auto md = f.metadata();
  md["meta"] = "{\"template\": 3}";
  io::save_safetensors(tmp / "meta.safetensors", {{"w", torch::zeros({2})}}, md);
  EXPECT_THROW(load_k_predictor(tmp / "meta.safetensors"), FormatError);
  testing::write_file(tmp / "junk.safetensors", "not a file");
  EXPECT_THROW(load_k_predictor(tmp / "junk.safetensors"), FormatError);
}

TEST(AutoKeepPlan, ParsesTemplatesAndRejectsWhatItCannotMean) {
  const ModelShape cfg = preset_shape("tiny", 0);  // N_v 16, 4 layers
  EXPECT_TRUE(is_auto_keep("divprune:keep=auto"));
  EXPECT_FALSE(is_auto_keep("divprune:keep=8"));
  auto a = parse_auto_keep("divprune:keep=auto", cfg);
  EXPECT_EQ(a.template_text, "divprune:layer=0");
  EXPECT_EQ(a.predictor_file, "");
  EXPECT_EQ(a.at(4, cfg).to_string(), "divprune:layer=0,keep=4");
  auto b = parse_auto_keep("fastv:keep=auto:file=/x/k.safetensors,layer=1", cfg);
  EXPECT_EQ(b.template_text, "fastv:layer=1");
  EXPECT_EQ(b.predictor_file, "/x/k.safetensors");
  EXPECT_EQ(parse_auto_keep(b.to_string(), cfg).predictor_file, b.predictor_file);
  EXPECT_THROW(parse_auto_keep("fastv:keep=auto+fastv:layer=3,keep=2", cfg), InvalidArgument);
  EXPECT_THROW(parse_auto_keep("fastv:keep=auto,keep=4", cfg), InvalidArgument);
  EXPECT_THROW(parse_auto_keep("keep=auto", cfg), InvalidArgument);
  EXPECT_THROW(parse_auto_keep("fastv:keep=auto:path=x", cfg), InvalidArgument);
  EXPECT_THROW(parse_auto_keep("nosuch:keep=auto", cfg), InvalidArgument);
  EXPECT_THROW(parse_auto_keep("fastv:layer=9,keep=auto", cfg), InvalidArgument);
}

TEST(AutoKeepPlan, RefusesAPredictorMadeForAnotherTemplateOrModel) {
  const ModelShape cfg = preset_shape("tiny", 0);
  testing::TempDir tmp;
  auto m = meta(2 * cfg.hidden_size + 2);
  m.features = "visual-mean+question-mean+cls-entropy+cls-top10-v1";
  KPredictor p(m);
  save_k_predictor(tmp / "k.safetensors", p);
  auto plan = parse_auto_keep("fastv:keep=auto:file=" + tmp / "k.safetensors", cfg);
  EXPECT_THROW(load_plan_predictor(plan, tmp.str(), cfg), ConfigError) << "trained for divprune";
  plan = parse_auto_keep("divprune:keep=auto:file=" + tmp / "k.safetensors", cfg);
  EXPECT_NO_THROW(load_plan_predictor(plan, tmp.str(), cfg));
  m.ladder = {2, 4, 32};
  KPredictor wide(m);
  save_k_predictor(tmp / "wide.safetensors", wide);
  plan.predictor_file = tmp / "wide.safetensors";
  EXPECT_THROW(load_plan_predictor(plan, tmp.str(), cfg), ConfigError) << "ladder beyond N_v = 16";
  plan.predictor_file = "";
  EXPECT_THROW(load_plan_predictor(plan, tmp.str(), cfg), IoError) << "no default file in the folder";
}

TEST(AutoKeepPlan, APermilleLadderKeepsAShareOfEachImage) {
  // A keep-ratio ladder (issue 47): rungs in ‰ of each image's own N_v, ending at 1000; loading its predictor
  // makes the plan's keep values shares.
  const ModelShape cfg = preset_shape("tiny", 0);  // N_v = 16
  testing::TempDir tmp;
  auto m = meta(2 * cfg.hidden_size + 2);
  m.features = "visual-mean+question-mean+cls-entropy+cls-top10-v1";
  m.ladder = {125, 250, 1000};
  m.ladder_unit = "permille";
  KPredictor p(m);
  save_k_predictor(tmp / "k.safetensors", p);
  EXPECT_EQ(load_k_predictor(tmp / "k.safetensors")->meta, m) << "the unit round-trips";
  auto plan = parse_auto_keep("divprune:keep=auto:file=" + tmp / "k.safetensors", cfg);
  EXPECT_FALSE(plan.permille);
  EXPECT_NO_THROW(load_plan_predictor(plan, tmp.str(), cfg));
  EXPECT_TRUE(plan.permille);
  EXPECT_EQ(plan.at(125, cfg).to_string(), "divprune:layer=0,keep=12.5%");
  EXPECT_EQ(plan.at(125, cfg).stages.at(0).keep, 2) << "12.5 % of the nominal 16 tokens";
  EXPECT_EQ(plan.keep_text(125), "keep 12.5%");
  EXPECT_TRUE(plan.full(1000, cfg));
  EXPECT_FALSE(plan.full(999, cfg));
  EXPECT_FALSE(plan.full(16, cfg)) << "16 ‰ is not N_v";
  m.ladder = {125, 250, 900};  // no full rung
  KPredictor short_ladder(m);
  save_k_predictor(tmp / "short.safetensors", short_ladder);
  plan.predictor_file = tmp / "short.safetensors";
  EXPECT_THROW(load_plan_predictor(plan, tmp.str(), cfg), ConfigError);
}

}  // namespace
}  // namespace vispco::optimize
