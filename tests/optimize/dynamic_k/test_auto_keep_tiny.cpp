// Dynamic K on the tiny random model: features against an independent computation, ladder labels against a
// brute-force evaluation (one generate() per sample and K), keep=auto with a constant predictor equals the
// static plan, grouped batches give single-request answers, the whole search end to end, and the CLI's
// one-line errors for a missing predictor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/eval_fixture.h"
#include "eval/metrics.h"
#include "eval/run_key.h"
#include "optimize/dynamic_k/auto_keep_eval.h"
#include "optimize/dynamic_k/dynamic_k.h"
#include "optimize/dynamic_k/k_features.h"
#include "optimize/dynamic_k/ladder_eval.h"
#include "optimize/self_answered.h"
#include "prune/auto_keep/auto_keep.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"

namespace vispco::optimize {
namespace {

namespace fs = std::filesystem;

using testing::self_answered;

const std::vector<int64_t> kLadder = {2, 4, 8, 16};

KPredictorMeta tiny_meta(const ModelShape& cfg, const std::string& tmpl) {
  KPredictorMeta m;
  m.template_text = tmpl;
  m.ladder = kLadder;
  m.n_features = k_feature_width(cfg);
  m.hidden = 8;
  m.features = kKFeatureRecipe;
  return m;
}

// A predictor that answers rung r whatever the input: zero weights, cumulative biases ±10.
KPredictor constant_predictor(const ModelShape& cfg, const std::string& tmpl, int r) {
  KPredictor p(tiny_meta(cfg, tmpl));
  torch::NoGradGuard g;
  for (auto& w : p->parameters()) w.zero_();
  for (int k = 0; k < 3; ++k) p->out->bias[k] = k < r ? 10.0 : -10.0;
  return p;
}

// The keep=auto plan `text` bound through the front door with predictor `p` (written to `dir` first).
BoundPlan bind_with(const std::string& text, KPredictor& p, const ModelShape& cfg, const std::string& dir) {
  const std::string path = (fs::path(dir) / "k_predictor.safetensors").string();
  save_k_predictor(path, p);
  return BoundPlan::bind(text + ":file=" + path, cfg, ScorerEnv{});
}

TEST(KFeatures, MatchAnIndependentComputation) {
  auto m = testing::load_tiny();
  const auto& ds = self_answered();
  std::vector<at::Tensor> px;
  for (int i = 0; i < 3; ++i)
    px.push_back(m.preprocess(io::load_image_rgb((ds.dir / ds.images[i]).string())));
  auto vt = m.encode_images(torch::stack(px), true);
  const std::vector<std::string> q = {ds.questions[0], ds.questions[1], ds.questions[2]};
  const auto f = k_features(m, vt, q);
  const int64_t D = m.shape().hidden_size, n_v = m.shape().n_visual_tokens;
  ASSERT_EQ(f.sizes(), (at::IntArrayRef{3, 2 * D + 2}));
  const auto table = m.net()->language_model->model->embed_tokens->weight;
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_LT(testing::max_diff(f[b].slice(0, 0, D), vt.embeds[b].to(at::kFloat).mean(0)), 1e-5);
    const auto ids = m.tokenizer().encode(q[b], false);
    at::Tensor sum = torch::zeros({D});
    for (auto id : ids) sum += table[id].to(at::kFloat);
    EXPECT_LT(testing::max_diff(f[b].slice(0, D, 2 * D), sum / static_cast<double>(ids.size())), 1e-5);
    // Entropy over N_v normalised by log N_v, and the top-10 % mass (at least one token), by plain loops.
    auto a = vt.cls_attention[b].to(at::kFloat);
    a = a / a.sum();
    double h = 0;
    std::vector<double> v;
    for (int64_t i = 0; i < n_v; ++i) {
      const double p = a[i].item<double>();
      h -= p > 0 ? p * std::log(p) : 0.0;
      v.push_back(p);
    }
    std::sort(v.rbegin(), v.rend());
    const int64_t top = std::max<int64_t>(1, n_v / 10);
    double mass = 0;
    for (int64_t i = 0; i < top; ++i) mass += v[i];
    EXPECT_NEAR(f[b][2 * D].item<double>(), h / std::log(double(n_v)), 1e-5);
    EXPECT_NEAR(f[b][2 * D + 1].item<double>(), mass, 1e-5);
  }
}

TEST(LadderEval, LabelsMatchABruteForceEvaluation) {
  auto m = testing::load_tiny();
  const auto& cfg = m.shape();
  const auto ds = eval::load_dataset(self_answered().dir.string());
  const auto plan = parse_auto_keep("divprune:keep=auto", cfg);
  testing::TempDir tmp;
  const auto le = evaluate_ladder(m, eval::model_folder_hash(testing::tiny_model_dir()), ds, 0, plan, kLadder,
                                  5, tmp / "store.sqlite", {});
  const auto labels = ladder_labels(le.table, KTarget::kCorrect);
  // Brute force: every sample alone at every K, scored by normalised exact match.
  for (size_t i = 0; i < ds.samples.size(); ++i) {
    const auto& s = ds.samples[i];
    VlmRequest req{m.preprocess(io::load_image_rgb(s.image_path)), m.prompt_ids(s.question)};
    std::vector<bool> right;
    for (auto k : kLadder) {
      PlanHook hook(plan.at(k, cfg), cfg);
      const auto text =
          generate(m, {req}, eval::default_eval_generation(), k < 16 ? &hook : nullptr).texts[0];
      right.push_back(eval::normalize_answer(text) == eval::normalize_answer(s.answer));
    }
    ASSERT_TRUE(right.back()) << "answers are the unpruned outputs";
    int label = 3;
    while (label > 0 && right[label - 1]) --label;
    EXPECT_EQ(labels[i], label) << s.id;
    for (size_t r = 0; r < kLadder.size(); ++r)
      EXPECT_EQ(le.table.score[i][r] >= 1.0, right[r]) << s.id << " K " << kLadder[r];
  }
  EXPECT_GT(le.table.llm_flops[0][3], le.table.llm_flops[0][0]);
}

TEST(AutoKeepEval, AConstantPredictorEqualsTheStaticPlan) {
  auto m = testing::load_tiny();
  const auto& cfg = m.shape();
  const auto ds = eval::load_dataset(self_answered().dir.string());
  const auto hash = eval::model_folder_hash(testing::tiny_model_dir());
  for (const std::string text : {"fastv:layer=2,keep=auto", "divprune:keep=auto"}) {
    const auto plan = parse_auto_keep(text, cfg);
    auto p = constant_predictor(cfg, plan.template_text, 1);  // K = 4
    testing::TempDir tmp;
    eval::EvalOptions o;
    o.batch_size = 4;
    const auto dyn = evaluate_auto_keep(m, hash, ds, o, bind_with(text, p, cfg, tmp.str()));
    PlanHook hook(plan.at(4, cfg), cfg);
    o.plan = plan.at(4, cfg).to_string();
    const auto stat = eval::evaluate(m, hash, ds, o, &hook);
    ASSERT_EQ(dyn.report.rows.size(), stat.rows.size());
    for (size_t i = 0; i < stat.rows.size(); ++i) {
      EXPECT_EQ(dyn.report.rows[i].id, stat.rows[i].id);
      EXPECT_EQ(dyn.report.rows[i].result.prediction, stat.rows[i].result.prediction) << text << " " << i;
      EXPECT_EQ(dyn.keep[i], 4);
    }
    EXPECT_DOUBLE_EQ(dyn.report.metrics.overall.accuracy(), stat.metrics.overall.accuracy());
    EXPECT_EQ(dyn.groups.size(), 1u);
    EXPECT_EQ(dyn.batching.padded_slots_arrival, 0);
  }
}

TEST(AutoKeepEval, GroupedBatchesGiveTheAnswersOfSingleRequests) {
  auto m = testing::load_tiny();
  const auto& cfg = m.shape();
  const auto ds = eval::load_dataset(self_answered().dir.string());
  const auto plan = parse_auto_keep("fastv:layer=2,keep=auto", cfg);
  KPredictor p(tiny_meta(cfg, plan.template_text), 5);
  {  // spread the rungs: fit the statistics on the real features and scale the output layer up
    std::vector<size_t> idx(ds.samples.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    fit_feature_stats(p, dataset_k_features(m, ds, idx, 4).features);
    torch::NoGradGuard g;
    p->out->weight.mul_(20.0);
  }
  testing::TempDir tmp;
  eval::EvalOptions o;
  o.batch_size = 4;
  o.store_path = tmp / "store.sqlite";
  const BoundPlan bound = bind_with("fastv:layer=2,keep=auto", p, cfg, tmp.str());
  const auto dyn = evaluate_auto_keep(m, eval::model_folder_hash(testing::tiny_model_dir()), ds, o, bound);
  ASSERT_GE(dyn.groups.size(), 2u) << "the test needs samples of different K";
  for (size_t i = 0; i < ds.samples.size(); ++i) {
    const auto& s = ds.samples[i];
    VlmRequest req{m.preprocess(io::load_image_rgb(s.image_path)), m.prompt_ids(s.question)};
    PlanHook hook(plan.at(dyn.keep[i], cfg), cfg);
    const auto alone =
        generate(m, {req}, eval::default_eval_generation(), dyn.keep[i] < 16 ? &hook : nullptr);
    EXPECT_EQ(dyn.report.rows[i].result.prediction, alone.texts[0]) << s.id << " at K " << dyn.keep[i];
  }
  size_t total = 0;
  for (const auto& [k, n] : dyn.groups) total += n;
  EXPECT_EQ(total, ds.samples.size());
  EXPECT_THROW(
      {
        auto so = o;
        so.shuffle_images = 1;
        evaluate_auto_keep(m, "h", ds, so, bound);
      },
      InvalidArgument);
}

TEST(DynamicK, SearchEndToEndOnTheTinyModel) {
  auto m = testing::load_tiny();
  const auto ds = eval::load_dataset(self_answered().dir.string());
  testing::TempDir tmp;
  DynamicKOptions o;
  o.template_text = "divprune:layer=0";
  o.ladder = {2, 4, 8};
  o.epsilon = 0.2;
  o.training.steps = 30;
  o.store_path = tmp / "store.sqlite";
  o.batch_size = 4;
  const auto rep =
      run_dynamic_k(m, testing::tiny_model_dir(), eval::model_folder_hash(testing::tiny_model_dir()), ds, ds,
                    ds, o, tmp / "out", true, {});
  EXPECT_EQ(rep.ladder, kLadder) << "N_v appended";
  EXPECT_EQ(rep.n_train, 12u);
  EXPECT_EQ(rep.n_train_labelled, 12u);
  EXPECT_EQ(rep.test_static.size(), 4u);
  EXPECT_DOUBLE_EQ(rep.test_static.back().figures.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(rep.test_oracle.accuracy, 1.0) << "every sample right at its own label";
  EXPECT_LE(rep.test_oracle.flops_ratio, 1.0);
  ASSERT_TRUE(rep.tau_met_epsilon);
  EXPECT_GE(rep.test_dynamic.accuracy, 0.8 - 1e-12) << "test = validation here, so ε (relative 0.2) holds";
  EXPECT_TRUE(rep.end_to_end.at("matches_table").get<bool>()) << rep.end_to_end.dump();
  EXPECT_TRUE(fs::exists(tmp / "out/dynamic_k.json"));
  EXPECT_TRUE(fs::exists(tmp / "out/dynamic_k.md"));
  auto p = load_k_predictor(rep.predictor_path);
  EXPECT_DOUBLE_EQ(p->meta.tau, rep.tau);
}

TEST(DynamicK, CliErrorsAreOneLine) {
  for (const std::string cmd :
       {"eval --model " + testing::tiny_model_dir() + " --data " + self_answered().dir.string() +
            " --plan divprune:keep=auto --out /tmp/vispco_dynk_cli",
        "generate --model " + testing::tiny_model_dir() + " --image " +
            (self_answered().dir / self_answered().images[0]).string() +
            " --prompt hi --plan fastv:keep=auto"}) {
    const auto r = testing::run_cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;  // vispco::Error
    EXPECT_NE(r.err.find("no K predictor"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace vispco::optimize
