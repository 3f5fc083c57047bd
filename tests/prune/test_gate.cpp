// The learned gate (prune/gate.h, gate_train.h, scorers/gate.cpp): the key-gate relaxation equals pruning at
// ℓ = 0 in the limit g → 0; the L1 term drives the gates down on a toy run; the file round trip; the
// scorer keeps the top-K gate logits and keys the store with the gate file's hash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/bound_plan.h"
#include "prune/gate.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"
#include "train/gate_train.h"

namespace vispco {
namespace {

using train::GateExample;
using train::GateStepReport;
using train::GateTrainOptions;
using train::train_gate;

TEST(Gate, KeyGateOfZeroEqualsRemovingTheToken) {
  auto m = testing::load_tiny();
  VlmRequest req{testing::test_pixels(56, 71), m.prompt_ids("What shape is the red object?")};
  c10::InferenceMode guard;
  auto vis = m.encode_images(req.pixels.unsqueeze(0)).embeds;
  auto& lm = m.net()->language_model;
  const int64_t L = m.shape().n_layers;
  auto state = build_prefill_state(m, {req}, vis);
  const int64_t T = state.hidden.size(1);
  const auto visual = testing::visual_tokens(state);
  std::set<int64_t> drop = {visual[1], visual[4], visual[5], visual[11]};
  auto gate = at::ones({1, T}, at::kFloat);
  std::vector<int64_t> keep;
  for (int64_t t = 0; t < T; ++t)
    if (drop.count(t))
      gate[0][t] = 0.0;
    else
      keep.push_back(t);
  KvCache c2(L);
  auto s1 = state;
  train::GateKeyHook hook(gate);
  auto h1 = lm->forward_gated(s1, hook);
  auto s2 = gather_tokens(state, at::tensor(keep, at::kLong).unsqueeze(0));
  auto h2 = lm->forward(s2, c2);
  auto l1 = lm->logits(h1.narrow(1, T - 1, 1)), l2 = lm->logits(h2.narrow(1, h2.size(1) - 1, 1));
  const double d = testing::max_diff(l1, l2);
  std::printf("key gate 0 vs removal: max logit difference %.3g\n", d);
  EXPECT_LT(d, 1e-4);
  // A gate of ones changes nothing (up to rounding: the gated path normalises the weights itself).
  KvCache c4(L);
  auto s3 = state, s4 = state;
  train::GateKeyHook ones(at::ones({1, T}));
  const double d1 = testing::max_diff(lm->forward_gated(s3, ones), lm->forward(s4, c4));
  std::printf("key gate 1 vs plain forward: max hidden difference %.3g\n", d1);
  EXPECT_LT(d1, 1e-5);
}

std::vector<GateExample> toy_batch(VisionLanguageModel& m, int64_t step, int64_t n) {
  static const char* const kQ[][2] = {{"What color is the cube?", "red"},
                                      {"How many spheres?", "3"},
                                      {"What shape is it?", "cube"},
                                      {"Is there a circle?", "no"}};
  std::vector<GateExample> out;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = step * n + b;
    out.push_back({testing::test_pixels(56, 100 + i % 6), kQ[i % 4][0], kQ[i % 4][1]});
  }
  return out;
}

TEST(Gate, L1TermDrivesGateValuesDownOnAToyRun) {
  auto m = testing::load_tiny();
  GateTrainOptions o;
  o.steps = 25;
  o.batch = 2;
  o.lr = 0.02;
  o.hidden = 16;
  const auto run = [&](double l1) {
    o.l1 = l1;
    std::vector<double> gates;
    train_gate(
        m, o, [&](int64_t s) { return toy_batch(m, s, o.batch); },
        [&](const GateStepReport& r) { gates.push_back(r.l1); });
    return gates;
  };
  auto with = run(2.0), without = run(0.0);
  std::printf("mean gate: start %.3f; after %ld steps: λ = 2 → %.3f, λ = 0 → %.3f\n", with.front(),
              (long)o.steps, with.back(), without.back());
  EXPECT_NEAR(with.front(), without.front(), 1e-6);  // same seed, same start
  EXPECT_LT(with.back(), with.front() - 0.2);
  EXPECT_LT(with.back(), without.back() - 0.1);
}

TEST(Gate, FileRoundTripAndScorer) {
  auto m = testing::load_tiny();
  testing::TempDir tmp;
  GateConfig cfg;
  cfg.d_model = m.shape().hidden_size;
  cfg.hidden = 8;
  cfg.use_question = true;
  cfg.temperature = 0.5;
  EXPECT_EQ(gate_config_from_json(to_json(cfg)), cfg);
  TokenGate gate(cfg, 3);
  const auto path = tmp / "g.safetensors";
  save_gate(path, gate);
  auto back = load_gate(path, cfg.d_model);
  EXPECT_EQ(back->cfg, cfg);
  auto x = at::randn({2, 5, cfg.d_model}), q = at::randn({2, cfg.d_model});
  EXPECT_TRUE(at::allclose(back->logits(x, q), gate->logits(x, q)));
  EXPECT_THROW(load_gate(path, cfg.d_model + 1), ConfigError);
  EXPECT_THROW(load_gate(tmp / "missing.safetensors"), IoError);
  EXPECT_THROW(load_gate(testing::tiny_model_dir() + "/model.safetensors"), FormatError);
  cfg.temperature = 0;
  EXPECT_THROW(cfg.validate(), InvalidArgument);

  // The scorer: top-K gate logits of the ℓ = 0 tokens, question pooled over the instruction tokens.
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  VlmRequest req{testing::test_pixels(56, 72), m.prompt_ids("Is the cube red?")};
  testing::RecordHook rec(0);
  generate(m, {req}, gc, &rec);
  const BoundPlan bound = BoundPlan::bind("gate:layer=0,keep=4,file=" + path, m.shape(), ScorerEnv{});
  EXPECT_NE(bound.key().find(" @gate=sha256:"), std::string::npos) << bound.key();
  const auto h = bound.hook();
  generate(m, {req}, gc, h.get());
  const auto vis = testing::visual_tokens(rec.seen), txt = testing::instruction_tokens(rec.seen);
  auto tokens =
      at::stack(std::vector<at::Tensor>{rec.seen.hidden[0].index_select(0, at::tensor(vis, at::kLong))});
  auto question = rec.seen.hidden[0].index_select(0, at::tensor(txt, at::kLong)).mean(0, true);
  c10::InferenceMode guard;
  auto z = gate->logits(tokens, question)[0];
  auto top = std::get<1>(z.topk(4));
  std::set<int64_t> expect;
  for (int64_t i = 0; i < 4; ++i)
    expect.insert(rec.seen.grid_index[0][vis[top[i].item<int64_t>()]].item<int64_t>());
  EXPECT_EQ(testing::kept_patches(h->traces()[0].kept[0]), expect);
  // No file anywhere: one clear error naming train-gate.
  try {
    PlanHook none(parse_plan("gate:layer=0,keep=4", 16), m.shape(), 0, ScorerEnv{tmp.str()});
    FAIL() << "expected an error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("train-gate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PlanHook(parse_plan("gate:layer=0,keep=4", 16), m.shape()), InvalidArgument);
  EXPECT_THROW(PlanHook(parse_plan("gate:layer=1,keep=4,file=" + path, 16), m.shape()), InvalidArgument);
}

}  // namespace
}  // namespace vispco
