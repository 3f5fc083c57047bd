// The tiny random Qwen2.5-VL (init-random's "tiny-qwen2.5-vl") through the code every family shares (issue
// 44's family checks, tests/model/family_checks.h): evaluation batched and pruned, a min-K search, and a
// served chat completion equal to generate(). Its images keep their aspect ratio: the 48×40 noise images make
// 6 visual tokens (smart_resize to 56×84 px: 2 × 3 merged), the served 200×200 PNG 49 (196×196 px: 7 × 7).
// A min-K search over a keep ratio (issue 47) prunes each image to its share of its own tokens; VisionZip
// ranks by the last ViT block's received attention (the tower has no [CLS] token).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/flops.h"
#include "eval/eval_fixture.h"
#include "io/image.h"
#include "model/family_checks.h"
#include "model/generate.h"
#include "model/n_visual_varies.h"
#include "model/quant.h"
#include "model/qwen2_vl/presets.h"
#include "model/qwen2_vl/tiny_qwen.h"
#include "optimize/dynamic_k/dynamic_k.h"
#include "optimize/optimize.h"
#include "prune/bound_plan.h"
#include "prune/gate.h"
#include "serve/server_fixture.h"
#include "test_util.h"
#include "train/gate_train.h"

namespace vispco {
namespace {

using testing::tiny_qwen_dir;

VisionLanguageModel load_tiny_qwen() { return VisionLanguageModel::load(tiny_qwen_dir(), RunContext{}); }

TEST(Qwen2VlPipeline, EvaluatesAndSearchesThroughTheSameCode) {
  testing::TempDir tmp;
  const auto dir = tmp.path() / "ds";
  auto m = load_tiny_qwen();
  testing::write_own_answers_dataset(m, dir, testing::write_noise_images(dir, 6), "q");
  testing::expect_evaluates_and_searches(m, tiny_qwen_dir(), dir,
                                         "answers are the model's own, batched or not");
}

// K of an image of n visual tokens under a keep ratio of p ‰, by hand: round half up of p·n/1000, at least 1.
int64_t ratio_keep(int64_t p, int64_t n) { return std::max<int64_t>(1, (p * n + 500) / 1000); }

// `vispco optimize --method min-k --scorer fastv` on Qwen: the template becomes a keep ratio (--keep-as
// auto), the search's answer is a keep=P% plan, and that plan keeps round(P · N_v) tokens of each image — 6
// of the 48×40 images, 16 of the 100×100 ones (112 px: 4 × 4).
TEST(Qwen2VlPipeline, MinKSearchesAKeepRatioOfEachImagesOwnTokens) {
  testing::TempDir tmp;
  const auto dir = tmp.path() / "ds";
  auto m = load_tiny_qwen();
  ASSERT_TRUE(n_visual_varies(m.shape()));
  std::vector<std::string> images = testing::write_noise_images(dir, 3);  // 48×40: N_v 6
  for (int i = 0; i < 3; ++i) {                                           // 100×100: N_v 16
    images.push_back("images/big" + std::to_string(i) + ".png");
    std::ofstream(dir / images.back(), std::ios::binary) << testing::test_png(100, 10 + i);
  }
  testing::write_own_answers_dataset(m, dir, images, "r");
  const auto ds = eval::load_dataset(dir.string());
  const auto hash = eval::model_folder_hash(tiny_qwen_dir());
  eval::EvalOptions eo;
  eo.store_path = tmp.str("store.sqlite");
  eo.batch_size = 3;
  const auto mean_kept = [&](const std::string& plan) {
    return eval::evaluate_plan(m, hash, ds, eo, parse_plan(plan, m.shape()), ScorerEnv{}).mean_n_visual_kept;
  };
  const auto none = eval::evaluate_plan(m, hash, ds, eo, PruningPlan{}, ScorerEnv{});
  EXPECT_DOUBLE_EQ(none.mean_n_visual, (3 * 6 + 3 * 16) / 6.0);
  // 37.5 % of 6 is 2.25 → 2, of 16 is 6: a mean of 4 (a count K = 6 would keep 6 and 6).
  EXPECT_DOUBLE_EQ(mean_kept("fastv:layer=2,keep=37.5%"), (3 * 2 + 3 * 6) / 6.0);

  optimize::ModelEvalSettings st;
  st.store_path = eo.store_path;
  st.batch_size = 3;
  optimize::ModelPlanEvaluator ev(m, hash, ds, ds, st);
  std::vector<int64_t> image_n_v;  // FLOPs are costed per image, at each image's own N_v
  for (const auto& spec : ev.image_flops(optimize::Split::kCalib)) image_n_v.push_back(spec.n_visual_tokens);
  EXPECT_EQ(image_n_v, (std::vector<int64_t>{6, 6, 6, 16, 16, 16}));
  optimize::OptimizeOptions o;
  o.method = "min-k";
  o.templates = {"fastv:layer=2"};
  o.epsilon = 0.0;
  o.min_speedup = 0;  // the tiny model's timings are noise: ε alone decides
  const auto r = optimize::run_optimize(o, ev);
  EXPECT_EQ(r.options.templates, std::vector<std::string>{"fastv:layer=2,keep={P}%"});
  ASSERT_TRUE(r.search.chosen) << r.search.chosen_reason;
  const optimize::EvalPoint& c = r.search.points.at(*r.search.chosen);
  const int64_t p = c.param;
  std::printf("min-k over keep ratios chose %s (%zu probes)\n", c.plan.c_str(),
              r.to_json()["details"]["probes"].size());
  ASSERT_GE(p, 1);
  ASSERT_LE(p, 1000);
  const std::string share = std::to_string(p / 10) + (p % 10 ? "." + std::to_string(p % 10) : "");
  EXPECT_EQ(c.plan, "fastv:layer=2,keep=" + share + "%");
  EXPECT_DOUBLE_EQ(c.keep_ratio, p / 1000.0);
  EXPECT_EQ(c.keep, ratio_keep(p, m.shape().n_visual_tokens)) << "K at the nominal N_v";
  EXPECT_DOUBLE_EQ(c.accuracy, 1.0) << "ε = 0 against the model's own answers";
  EXPECT_DOUBLE_EQ(mean_kept(c.plan), (3 * ratio_keep(p, 6) + 3 * ratio_keep(p, 16)) / 6.0) << c.plan;
  EXPECT_EQ(r.to_json()["details"]["param"], "keep ratio");
  ASSERT_TRUE(r.test);
  EXPECT_EQ(r.test->chosen.plan, c.plan);
  // The search's rule: the answer is within ε and the next smaller ratio probed, if any, is not.
  for (const auto& probe : r.to_json()["details"]["probes"])
    if (probe["keep"].get<int64_t>() == p - 1) EXPECT_FALSE(probe["within_epsilon"].get<bool>());
}

// `optimize --method dynamic-k` on Qwen (issue 47): the ladder is keep ratios in ‰ of each image's own N_v,
// the predictor file says so, and keep=auto then runs keep=P% plans — each image keeps its share of its own
// tokens (25 % of 6 is 1.5 → 2, of 16 is 4), and the keep=auto run end to end equals the ladder table.
TEST(Qwen2VlPipeline, DynamicKPredictsAKeepRatio) {
  testing::TempDir tmp;
  const auto dir = tmp.path() / "ds";
  auto m = load_tiny_qwen();
  std::vector<std::string> images = testing::write_noise_images(dir, 3);  // 48×40: N_v 6
  for (int i = 0; i < 3; ++i) {                                           // 100×100: N_v 16
    images.push_back("images/big" + std::to_string(i) + ".png");
    std::ofstream(dir / images.back(), std::ios::binary) << testing::test_png(100, 20 + i);
  }
  testing::write_own_answers_dataset(m, dir, images, "d");
  const auto ds = eval::load_dataset(dir.string());
  optimize::DynamicKOptions o;
  o.template_text = "fastv:layer=2";
  o.permille = true;
  o.ladder = {250, 500};
  o.epsilon = 0.5;
  o.training.steps = 20;
  o.coverage_draws = 0;
  o.store_path = tmp.str("store.sqlite");
  o.batch_size = 3;
  const auto hash = eval::model_folder_hash(tiny_qwen_dir());
  const auto rep = optimize::run_dynamic_k(m, tiny_qwen_dir(), hash, ds, ds, ds, o, tmp.str("out"), true, {});
  EXPECT_EQ(rep.ladder, (std::vector<int64_t>{250, 500, 1000})) << "the full rung appended";
  EXPECT_EQ(rep.test_static.front().name, "static keep 25.0%");
  EXPECT_TRUE(rep.end_to_end.at("matches_table").get<bool>()) << rep.end_to_end.dump();
  const auto bound = BoundPlan::bind("fastv:layer=2,keep=auto:file=" + rep.predictor_path, m.shape(),
                                     ScorerEnv{tiny_qwen_dir()});
  EXPECT_EQ(bound.predictor_meta().ladder_unit, "permille");
  const BoundPlan quarter = bound.at_keep(250);
  EXPECT_EQ(quarter.text(), "fastv:layer=2,keep=25%");
  EXPECT_TRUE(bound.at_keep(1000).unpruned());
  eval::EvalOptions eo;
  eo.store_path = o.store_path;
  eo.batch_size = 3;
  EXPECT_DOUBLE_EQ(eval::evaluate_plan(m, hash, ds, eo, quarter.plan(), ScorerEnv{}).mean_n_visual_kept,
                   (3 * ratio_keep(250, 6) + 3 * ratio_keep(250, 16)) / 6.0);
  // The ladder's FLOPs are each image's own: the static 25 % rung costs, per sample, layers 0–1 at its text +
  // N_v tokens and the rest at its text + its share of N_v (cost/flops.h prefill_flops, tokens by hand).
  const int64_t L = find_qwen2_vl_preset("tiny-qwen2.5-vl").config.text.num_hidden_layers;
  double plan = 0, full = 0;
  for (size_t i = 0; i < ds.samples.size(); ++i) {
    const cv::Mat rgb = io::load_image_rgb(ds.samples[i].image_path);
    const FlopsSpec spec = m.family().image_flops(rgb.rows, rgb.cols);
    const int64_t n_v = i < 3 ? 6 : 16, n_t = int64_t(m.prompt_ids(ds.samples[i].question).size()) - 1;
    ASSERT_EQ(spec.n_visual_tokens, n_v);
    std::vector<int64_t> pruned(L, n_t + ratio_keep(250, n_v)), unpruned(L, n_t + n_v);
    pruned[0] = pruned[1] = n_t + n_v;
    const auto p = prefill_flops(spec, pruned), u = prefill_flops(spec, unpruned);
    plan += double(p.decoder_total + p.lm_head);
    full += double(u.decoder_total + u.lm_head);
  }
  EXPECT_NEAR(rep.test_static.front().figures.flops_ratio, plan / full, 1e-12);
}

// The learned gate on Qwen (issue 47): a training batch of two image sizes runs one prefill per layout, and
// its loss is the batch mean — each part weighted by its answer tokens (task) and visual tokens (gate),
// counted here by hand — of the two images' losses alone; a trained gate then prunes each image to its share.
TEST(Qwen2VlPipeline, TrainsTheLearnedGateOnImagesOfDifferentSizes) {
  auto m = load_tiny_qwen();
  const auto small = m.preprocess(io::decode_image_rgb(testing::test_png(48, 1)));  // fewer tokens
  const auto big = m.preprocess(io::decode_image_rgb(testing::test_png(100, 2)));   // 112 px: N_v 16
  const std::vector<train::GateExample> batch{{small, "what?", "one two"}, {big, "and this?", "three"}};
  GateConfig gc;
  gc.d_model = m.shape().hidden_size;
  gc.hidden = 8;
  TokenGate gate(gc, 5);
  const auto both = train::gate_loss(m, gate, batch, 0.5);
  const auto a = train::gate_loss(m, gate, {batch[0]}, 0.5), b = train::gate_loss(m, gate, {batch[1]}, 0.5);
  const double na = double(m.tokenizer().encode("one two", false).size() + 1),
               nb = double(m.tokenizer().encode("three", false).size() + 1);  // answer tokens + EOS
  const double va = double(m.encode_image_list({small}).embeds.size(1)),
               vb = double(m.encode_image_list({big}).embeds.size(1));
  EXPECT_EQ(vb, 16);
  ASSERT_NE(va, vb) << "two layouts in one batch";
  EXPECT_NEAR(both.task, (a.task * na + b.task * nb) / (na + nb), 1e-5 * both.task);
  EXPECT_NEAR(both.l1, (a.l1 * va + b.l1 * vb) / (va + vb), 1e-6);
  EXPECT_NEAR(both.total.item<double>(), both.task + 0.5 * both.l1, 1e-5);

  // Training with a strong L1 weight lowers the mean gate; the gate file then runs as a keep-ratio plan.
  train::GateTrainOptions o;
  o.steps = 8;
  o.batch = 2;
  o.l1 = 5.0;
  o.lr = 1e-2;
  o.hidden = 8;
  double first = 0, last = 0;
  auto trained = train::train_gate(
      m, o, [&](int64_t) { return batch; },
      [&](const train::GateStepReport& r) { (r.step == 1 ? first : last) = r.l1; });
  EXPECT_LT(last, first) << "mean gate " << first << " → " << last;
  testing::TempDir tmp;
  save_gate(tmp / "gate.safetensors", trained);
  const auto plan = parse_plan("gate:keep=50%,file=" + tmp / "gate.safetensors", m.shape());
  const auto bound = BoundPlan::bind(plan, m.shape(), ScorerEnv{tiny_qwen_dir()});
  const auto hook = bound.hook(0);
  const auto res = generate(m, {VlmRequest{big, m.prompt_ids("q")}}, GenerationConfig{}, hook.get());
  EXPECT_EQ(res.stats.n_visual_kept, 8) << "50 % of the 100×100 image's 16 tokens";
}

// Greedy first-step logits of a float and a quantised copy of one model on one image: {max |a − b|, max |a|}.
std::pair<double, double> first_logits_diff(VisionLanguageModel& f, VisionLanguageModel& q,
                                            const at::Tensor& px) {
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  const auto a = generate(f, {{px, f.prompt_ids("What?")}}, gc, nullptr, true);
  const auto b = generate(q, {{px, q.prompt_ids("What?")}}, gc, nullptr, true);
  return {(a.step_logits[0] - b.step_logits[0]).abs().max().item<double>(),
          a.step_logits[0].abs().max().item<double>()};
}

// int8 weights for Qwen's decoder (issue 47): every q/k/v/o, gate/up/down of each layer and the untied head —
// counted from the preset's config — and the first logits stay within 5 % of the float model's largest.
TEST(Qwen2VlPipeline, Int8DecoderStaysCloseToFloat) {
  auto f = load_tiny_qwen(), q = load_tiny_qwen();
  const auto& text = find_qwen2_vl_preset("tiny-qwen2.5-vl").config.text;
  const auto rep = quantize_int8_decoder(q.language_model(), q.network());
  EXPECT_EQ(rep.n_layers, 7 * text.num_hidden_layers + (text.tie_word_embeddings ? 0 : 1));
  const auto px = f.preprocess(io::decode_image_rgb(testing::test_png(100, 4)));
  const auto [diff, scale] = first_logits_diff(f, q, px);
  std::printf("int8 tiny Qwen decoder: first logits max |diff| %.3e of max |logit| %.3e\n", diff, scale);
  EXPECT_LE(diff, 0.05 * scale);
  EXPECT_GT(diff, 0.0) << "the int8 path ran";
}

// int8 for Qwen's vision tower too (`--quant-tower`, issue 47): per ViT block qkv, proj and the three SwiGLU
// layers (Qwen2.5-VL), plus the merger's two — counted from the preset's config — and nothing of the decoder
// twice; the visual tokens and the first logits stay within 5 % of the float model's largest.
TEST(Qwen2VlPipeline, Int8TowerQuantisesEveryVisionLinearLayer) {
  auto f = load_tiny_qwen(), q = load_tiny_qwen();
  const auto& cfg = find_qwen2_vl_preset("tiny-qwen2.5-vl").config;
  ASSERT_EQ(cfg.vision.arch, QwenVisionArch::kQwen25VL);
  const auto dec = quantize_int8_decoder(q.language_model(), q.network());
  const auto tower = quantize_int8_tower(q.network(), q.language_model());
  EXPECT_EQ(dec.n_layers, 7 * cfg.text.num_hidden_layers + (cfg.text.tie_word_embeddings ? 0 : 1));
  EXPECT_EQ(tower.n_layers, (2 + 3) * cfg.vision.depth + 2);
  EXPECT_EQ(quantize_int8_tower(q.network(), q.language_model()).n_layers, 0) << "nothing left in float";
  const auto px = f.preprocess(io::decode_image_rgb(testing::test_png(100, 4)));
  at::Tensor ea, eb;
  {
    c10::InferenceMode guard;
    ea = f.encode_image_list({px}).embeds;
    eb = q.encode_image_list({px}).embeds;
  }
  ASSERT_EQ(ea.sizes(), eb.sizes());
  const double escale = ea.abs().max().item<double>(), ediff = (ea - eb).abs().max().item<double>();
  const auto [diff, scale] = first_logits_diff(f, q, px);
  std::printf("int8 tiny Qwen tower: visual tokens max |diff| %.3e of %.3e; first logits %.3e of %.3e\n",
              ediff, escale, diff, scale);
  EXPECT_GT(ediff, 0.0) << "the tower's int8 path ran";
  EXPECT_LE(ediff, 0.05 * escale);
  EXPECT_LE(diff, 0.05 * scale);
}

TEST(Qwen2VlPipeline, ServesChatCompletionsAsGenerateAnswers) {
  testing::expect_serves_as_generate(load_tiny_qwen(), tiny_qwen_dir(), testing::test_png(200, 5),
                                     "divprune:keep=8", 8);
}

// The server reports each request's own N_v: a 200×200 image makes 49 visual tokens (196 px: 7 × 7), a
// 100×100 one 16 (112 px: 4 × 4); prompt_tokens counts them with the text.
TEST(Qwen2VlPipeline, ServedUsageCountsEachImagesOwnTokens) {
  testing::ServerFixture f(load_tiny_qwen(), tiny_qwen_dir(), {}, {});
  auto c = f.client();
  for (const auto [size, n_visual] : {std::pair{200, 49}, std::pair{100, 16}}) {
    const auto res =
        c.Post("/v1/chat/completions", testing::chat_body("What?", testing::test_png(size, 1), 2).dump(),
               "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const auto reply = nlohmann::json::parse(res->body);
    EXPECT_EQ(reply["vispco"]["visual_tokens"], n_visual) << size;
    EXPECT_GT(reply["usage"]["prompt_tokens"].get<int64_t>(), n_visual) << size;
  }
}

// VisionZip without a [CLS] token: it ranks by the attention each merged token's patches receive in the
// tower's last block. On a 100×100 image (16 tokens), contextual=0 keeps the top 4 of encode_image_list's
// signal; the default keep=4 (3 dominant + 1 contextual) keeps 4. (Parity of the signal itself with the
// float64 reference: test_qwen_visionzip_reference.cpp.)
TEST(Qwen2VlPipeline, VisionZipKeepsTheTokensTheLastBlockAttendsToMost) {
  auto m = load_tiny_qwen();
  const VlmRequest req{m.preprocess(io::decode_image_rgb(testing::test_png(100, 2))), m.prompt_ids("What?")};
  at::Tensor received;
  {
    c10::InferenceMode guard;
    received = m.encode_image_list({req.pixels}, /*want_cls_attention=*/true).cls_attention[0].cpu();
  }
  ASSERT_EQ(received.numel(), 16);
  const auto top = std::get<0>(std::get<1>(received.topk(4)).sort());
  PlanHook hook(parse_plan("visionzip:keep=4,contextual=0", m.shape()), m.shape());
  const auto out = generate(m, {req}, testing::greedy(1), &hook);
  EXPECT_TRUE(at::nonzero(hook.traces().back().kept[0].cpu()).squeeze(1).equal(top));
  EXPECT_EQ(out.stats.n_visual_kept, 4);
  PlanHook merging(parse_plan("visionzip:keep=4", m.shape()), m.shape());
  EXPECT_EQ(generate(m, {req}, testing::greedy(1), &merging).stats.n_visual_kept, 4);
}

}  // namespace
}  // namespace vispco
