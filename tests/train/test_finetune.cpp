// Prune-then-fine-tune on the tiny model: the replayed plan in a training forward over prompt + answer gives
// the inference prefill's first-token logits; a keep-all plan leaves the loss unchanged; a few steps fit one
// batch; run_finetune validates, early-stops, resumes, writes a model that records its plan; the CLI takes
// that plan by default and warns when told another.
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/evaluator.h"
#include "eval/synthvqa/generator.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/replay_hook.h"
#include "test_util.h"
#include "train/conversation_loss.h"
#include "train/finetune.h"

namespace vispco::train {
namespace {

namespace fs = std::filesystem;

struct Batch {
  std::vector<VlmRequest> prompts, full;  // prompt only / prompt + answer + EOS
  std::vector<std::vector<std::pair<std::string, std::string>>> turns;
  at::Tensor images;
};

Batch batch(VisionLanguageModel& m, int n) {
  Batch b;
  std::vector<at::Tensor> px;
  for (int i = 0; i < n; ++i) {
    const auto s = eval::synthvqa::make_sample(77, static_cast<uint64_t>(i));
    px.push_back(m.preprocess(s.rgb));
    b.prompts.push_back({px.back(), m.prompt_ids(s.question)});
    auto ids = b.prompts.back().prompt_ids;
    auto ans = m.tokenizer().encode(s.answer, false);
    ids.insert(ids.end(), ans.begin(), ans.end());
    ids.push_back(m.tokenizer().eos_id());
    b.full.push_back({px.back(), ids});
    b.turns.push_back({{s.question, s.answer}});
  }
  b.images = torch::stack(px);
  return b;
}

// One greedy token for each prompt of `b` with `hook` on, which thereby records its plan's decisions there.
GenerationOutput first_token(VisionLanguageModel& m, const Batch& b, PlanHook& hook,
                             bool record_logits = false) {
  GenerationConfig one;
  one.max_new_tokens = 1;
  return generate(m, b.prompts, one, &hook, record_logits);
}

// The decisions of `plan` on the prompts of `b`, to replay in a training forward.
ReplayHook replayed(VisionLanguageModel& m, const Batch& b, const std::string& plan) {
  PlanHook hook(parse_plan(plan, m.shape()), m.shape());
  first_token(m, b, hook);
  return ReplayHook(hook.traces());
}

TEST(Finetune, ReplayedPlanGivesTheInferencePrefillsFirstTokenLogits) {
  auto m = testing::load_tiny();
  const auto& cfg = m.config();
  auto b = batch(m, 3);  // questions of different lengths: left padding in both forwards
  for (const std::string text :
       {"fastv:layer=2,keep=4", "divprune:keep=5", "fastv:layer=1,keep=8+fastv:layer=3,keep=3"}) {
    PlanHook hook(parse_plan(text, m.shape()), m.shape());
    const auto inf = first_token(m, b, hook, true);
    ReplayHook replay(hook.traces());
    at::NoGradGuard ng;
    auto feats = m.net()->vision_tower->forward(b.images, cfg.n_vision_layers_used(), true).features;
    auto state = build_prefill_state(m, b.full, m.net()->multi_modal_projector->forward(feats));
    KvCache cache(cfg.text.num_hidden_layers);
    auto logits = m.net()->language_model->logits(m.net()->language_model->forward(state, cache, &replay));
    for (int64_t r = 0; r < 3; ++r) {
      // The last prompt token sits at position (prompt ids − 1 placeholder) + N_v − 1.
      const int64_t pos =
          static_cast<int64_t>(b.prompts[r].prompt_ids.size()) - 1 + cfg.n_visual_tokens() - 1;
      auto t = at::nonzero(state.positions[r].eq(pos) & state.valid[r]);
      ASSERT_EQ(t.size(0), 1) << text;
      const double d =
          testing::max_diff(logits[r][t[0][0].item<int64_t>()], inf.step_logits[0][r].to(at::kFloat));
      EXPECT_LT(d, 1e-4) << text << " row " << r;
    }
    EXPECT_EQ(state.visual.sum(1)[0].item<int64_t>(), hook.plan().stages.back().keep) << text;
  }
}

TEST(Finetune, AKeepAllPlanLeavesTheLossUnchangedAndMergingPlansAreRefused) {
  auto m = testing::load_tiny();
  auto b = batch(m, 2);
  ReplayHook replay = replayed(m, b, "fastv:layer=2,keep=16");
  at::NoGradGuard ng;
  ConversationOptions co;
  co.prune_hook = &replay;
  const auto with_parts = conversation_loss(m, b.images, b.turns, co);
  const auto without_parts = conversation_loss(m, b.images, b.turns, ConversationOptions{});
  const double with = with_parts.total.item<double>(), without = without_parts.total.item<double>();
  EXPECT_NEAR(with, without, 1e-6);
  // The count the loss averaged over: each answer's tokens and its EOS (the ids appended in batch()), with
  // and without the pruning forward (text tokens are never pruned).
  int64_t n_answer = 0;
  for (size_t i = 0; i < b.full.size(); ++i)
    n_answer += static_cast<int64_t>(b.full[i].prompt_ids.size() - b.prompts[i].prompt_ids.size());
  EXPECT_EQ(with_parts.n_targets, n_answer);
  EXPECT_EQ(without_parts.n_targets, n_answer);
  ReplayHook pruning = replayed(m, b, "fastv:layer=2,keep=4");
  co.prune_hook = &pruning;
  EXPECT_EQ(conversation_loss(m, b.images, b.turns, co).n_targets, n_answer);
  PlanHook vz(parse_plan("visionzip:keep=6", m.shape()), m.shape());
  first_token(m, b, vz);
  EXPECT_THROW(ReplayHook{vz.traces()}, InvalidArgument);
}

TEST(Finetune, AFewStepsWithThePlanFitOneBatch) {
  auto m = testing::load_tiny();
  auto b = batch(m, 4);
  ReplayHook replay = replayed(m, b, "fastv:layer=2,keep=4");
  ConversationOptions co;
  co.prune_hook = &replay;
  auto params = m.net()->language_model->parameters();
  for (auto& p : params) p.set_requires_grad(true);  // loaded for inference
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-2));
  double first = 0, last = 0;
  for (int s = 0; s < 15; ++s) {
    opt.zero_grad();
    auto l = conversation_loss(m, b.images, b.turns, co).total;
    if (s == 0) first = l.item<double>();
    last = l.item<double>();
    l.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.7 * first) << first << " → " << last;
}

TEST(Finetune, TrainingScenesWrapAtThePoolSize) {
  // Step s, pair b of a batch of 4 is scene 4·s + b of the stream; with --train-scenes 5 that index mod 5
  // (values by hand).
  FinetuneOptions o;
  o.batch = 4;
  EXPECT_EQ(training_scene(o, 2, 1), 9u);
  o.train_scenes = 5;
  EXPECT_EQ(training_scene(o, 0, 3), 3u);
  EXPECT_EQ(training_scene(o, 1, 0), 4u);
  EXPECT_EQ(training_scene(o, 1, 1), 0u);
  EXPECT_EQ(training_scene(o, 2, 1), 4u);
}

TEST(Finetune, RunValidatesResumesAndRecordsItsPlan) {
  testing::TempDir tmp;
  eval::synthvqa::SynthOptions so;
  so.seed = 5;
  so.count = 6;
  so.n_threads = 1;
  eval::synthvqa::generate_synthvqa(so, tmp / "val");
  const auto val = eval::load_dataset(tmp / "val");
  FinetuneOptions o;
  o.plan = "fastv:layer=2,keep=4";
  o.train = "decoder-last-2";
  o.steps = 4;
  o.batch = 2;
  o.val_every = 2;
  o.patience = 5;
  o.eval_batch = 3;
  o.lr = 1e-3;
  o.test_limit = 4;
  const auto rep = run_finetune(testing::tiny_model_dir(), val, &val, o, tmp / "run", 1, {});
  ASSERT_EQ(rep.checks.size(), 3u);  // steps 0, 2, 4
  size_t best = 0;
  for (size_t i = 1; i < rep.checks.size(); ++i)
    if (rep.checks[i].val_accuracy > rep.checks[best].val_accuracy) best = i;
  EXPECT_EQ(rep.best_step, rep.checks[best].step);
  EXPECT_EQ(rep.stopped, "steps done");
  EXPECT_EQ(tuned_plan_of(tmp / "run/model"), "fastv:layer=2,keep=4");
  EXPECT_EQ(tuned_plan_of(testing::tiny_model_dir()), "");
  EXPECT_NO_THROW(VisionLanguageModel::load(tmp / "run/model", RunContext{}));
  ASSERT_FALSE(rep.test.is_null());
  EXPECT_EQ(rep.test.at("n").get<size_t>(), 4u);
  // The tuned model's unpruned test accuracy, recomputed here from its folder.
  {
    auto tuned = VisionLanguageModel::load(tmp / "run/model", RunContext{});
    eval::EvalOptions eo;
    eo.limit = 4;
    const auto r = eval::evaluate(tuned, "h", val, eo);
    EXPECT_DOUBLE_EQ(r.metrics.overall.accuracy(), rep.test.at("unpruned_after").at("all").get<double>());
  }
  // Running again resumes at the end: nothing new.
  const auto again = run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "run", 1, {});
  EXPECT_EQ(again.checks.size(), 3u);
  EXPECT_EQ(again.best_step, rep.best_step);
  // Issue 45 item 7: a run killed while publishing its checkpoint (between the rename-aside renames:
  // checkpoint/ moved to checkpoint.old/, a partial checkpoint.tmp/) resumes from it rather than from step 0.
  namespace fs = std::filesystem;
  const fs::path ckpt = tmp.path() / "run" / "checkpoint";
  fs::rename(ckpt, ckpt.string() + ".old");
  fs::create_directories(ckpt.string() + ".tmp");
  testing::write_file(ckpt.string() + ".tmp/params.pt", "partial");
  std::string said;
  const auto after_kill = run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "run", 1,
                                       [&](const std::string& line) { said += line + "\n"; });
  EXPECT_NE(said.find("resumed at step 4"), std::string::npos) << said;
  EXPECT_EQ(after_kill.checks.size(), 3u);
  EXPECT_FALSE(fs::exists(ckpt.string() + ".old"));
  o.lr = 2e-3;
  EXPECT_THROW(run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "run", 1, {}), InvalidArgument);
  // The checkpoint holds no train_scenes key (0 is not written, nor did vispco before the key joined the JSON
  // form): such a checkpoint did not record the scene pool, so a run that names one resumes it.
  o.lr = 1e-3;
  o.train_scenes = 7;
  EXPECT_NO_THROW(run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "run", 1, {}));
  // The CLI takes the recorded plan by default, and warns when told another.
  const std::string image = (tmp.path() / "val" / val.samples[0].image).string();
  auto r = testing::run_cli("generate --model " + tmp / "run/model" + " --image " + image +
                            " --prompt hi --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fine-tuned for"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("kept 4"), std::string::npos) << r.out;
  r = testing::run_cli("generate --model " + tmp / "run/model" + " --image " + image +
                       " --prompt hi --plan none --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("kept 16"), std::string::npos) << r.out;
}

TEST(Finetune, StoppedAtAStepAndResumedEqualsOneRun) {
  testing::TempDir tmp;
  eval::synthvqa::SynthOptions so;
  so.seed = 5;
  so.count = 2;
  so.n_threads = 1;
  eval::synthvqa::generate_synthvqa(so, tmp / "val");
  const auto val = eval::load_dataset(tmp / "val");
  FinetuneOptions o;
  o.plan = "fastv:layer=2,keep=4";
  o.steps = 4;
  o.batch = 2;
  o.val_every = 2;
  o.patience = 5;
  o.lr = 1e-2;
  EXPECT_THROW(run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "bad", 1, {}, {}, nullptr, 4),
               InvalidArgument);
  run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "one", 1, {});
  const auto paused =
      run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "two", 1, {}, {}, nullptr, 2);
  EXPECT_TRUE(paused.paused) << paused.stopped;
  EXPECT_FALSE(std::filesystem::exists(tmp / "two/model"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "two/finetune.json"));
  const auto resumed = run_finetune(testing::tiny_model_dir(), val, nullptr, o, tmp / "two", 1, {});
  EXPECT_FALSE(resumed.paused);
  EXPECT_EQ(resumed.stopped, "steps done");
  // One process, the checkpoint's exact values: the same weights as the uninterrupted run, bit for bit.
  std::vector<at::Tensor> a, b;
  torch::load(a, tmp / "one/checkpoint/params.pt");
  torch::load(b, tmp / "two/checkpoint/params.pt");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << i;
}

TEST(Finetune, OptionsValidateAndRoundTrip) {
  FinetuneOptions o;
  EXPECT_THROW(o.validate(), InvalidArgument) << "no plan";
  o.plan = "fastv:layer=2,keep=4";
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(finetune_options_from_json(to_json(o)), o);
  o.train_scenes =
      500;  // once missing from the JSON form: a resumed run could change its scene pool unnoticed
  EXPECT_EQ(finetune_options_from_json(to_json(o)), o);
  o.train = "decoder-last-0";
  EXPECT_THROW(o.validate(), InvalidArgument);
  o.train = "encoder";
  EXPECT_THROW(o.validate(), InvalidArgument);
  EXPECT_THROW(finetune_options_from_json({{"plan", "x"}, {"bogus", 1}}), InvalidArgument);
  auto r = testing::run_cli("finetune --model m --plan x --out o --val v --epochs 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--train-scenes"), std::string::npos) << r.err;
  // The counts bind to FinetuneOptions' unsigned members: a negative one is refused by name, on one line.
  for (const std::string flag : {"--val-limit", "--test-limit", "--train-scenes"}) {
    auto neg = testing::run_cli("finetune --model m --plan x --out o --val v " + flag + " -1");
    EXPECT_NE(neg.exit_code, 0) << flag;
    EXPECT_NE(neg.err.find(flag), std::string::npos) << neg.err;
    EXPECT_EQ(std::count(neg.err.begin(), neg.err.end(), '\n'), 1) << neg.err;
  }
  // An option the command does not have: one line naming it, exit 2.
  auto bogus = testing::run_cli("finetune --model m --plan x --out o --val v --bogus");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.err;
  EXPECT_NE(bogus.err.find("--bogus"), std::string::npos) << bogus.err;
  EXPECT_EQ(std::count(bogus.err.begin(), bogus.err.end(), '\n'), 1) << bogus.err;
}

}  // namespace
}  // namespace vispco::train
