// Training of the bundled model on a micro recipe: losses fall, a resumed run takes the same next step as an
// uninterrupted one, questions derived from a scene include the generator's own, and patch labels sit where
// the scene puts objects and text.
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/synthvqa/generator.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/llava/llava_prompt.h"
#include "model/llava/presets.h"
#include "test_util.h"
#include "train/conversation_loss.h"
#include "train/micro_recipe.h"
#include "train/patch_labels.h"
#include "train/scene_questions.h"
#include "train/trainer.h"

namespace vispco::train {
namespace {

using namespace eval::synthvqa;

using testing_micro::micro_recipe;

TEST(Training, VisionLossFallsOnAMicroRecipe) {
  testing::TempDir tmp;
  auto r = micro_recipe();
  r.vision.steps = 20;
  r.vision.lr = 2e-2;
  Trainer t(r, tmp.str("run"), RunContext{});
  std::vector<double> losses;
  for (int i = 0; i < 20; ++i) losses.push_back(t.step().loss);
  // Six heads start near Σ ln(classes) ≈ 11. The loss is foreground/background-balanced, so the "nothing
  // here" majority is only half of it: a 15% drop in 20 steps needs real learning (a frozen tower stays
  // within a few % of the start).
  std::printf("vision loss: first %.3f last %.3f\n", losses.front(), losses.back());
  EXPECT_LT(losses.back(), 0.85 * losses.front());
}

TEST(Training, PositionLossMakesThePatchPositionReadableFromTheTowersFeatures) {
  testing::TempDir tmp;
  auto r = micro_recipe();
  r.vision.steps = 300;  // at weight 1 it stayed at the constant guess (5.7 patches after 300 steps)
  r.vision.lr = 2e-2;
  r.vision.position_loss = 10.0;
  r.decoder.steps = 0;
  Trainer t(r, tmp.str("run"), RunContext{});
  while (!t.done()) t.step();
  std::ifstream in(tmp.str("run/tower_probe.json"));
  const double err = nlohmann::json::parse(in)["position"]["mean_abs_error_patches"].get<double>();
  // The best constant guess (the grid's middle) is off by mean |c − 11.5| over c = 0…23 = 6.0 patches on each
  // axis; a tower that keeps where its patches are does much better.
  std::printf("position mean abs error after 300 steps: %.2f patches (constant guess: 6.00)\n", err);
  EXPECT_LT(err, 3.0);
}

TEST(Training, CountAndGlyphIndexHeadsAddTheirCrossEntropiesToTheVisionLoss) {
  testing::TempDir tmp;
  auto r = micro_recipe();
  r.vision.steps = 1;
  r.decoder.steps = 0;
  Trainer plain(r, tmp.str("plain"), RunContext{});
  const double base = plain.step().loss;
  r.vision.count_heads = true;
  r.vision.glyph_index_head = true;
  Trainer extra(r, tmp.str("extra"), RunContext{});
  const double with = extra.step().loss;
  // At initialisation each balanced head costs ≈ ln(classes): 2 · ln 11 (counts) + ln 5 (glyph index) ≈ 6.41.
  std::printf("first vision loss: %.3f without, %.3f with the extra heads\n", base, with);
  EXPECT_NEAR(with - base, 2 * std::log(11.0) + std::log(5.0), 0.7);
  // The tower probe reports the extra heads.
  std::ifstream in(tmp.str("extra/tower_probe.json"));
  const auto probe = nlohmann::json::parse(in);
  for (const char* head : {"colour_count", "shape_count", "glyph_index"}) {
    ASSERT_TRUE(probe.contains(head)) << head;
    EXPECT_GT(probe[head]["foreground_patches"].get<int64_t>(), 0) << head;
  }
}

// A random-weight model (seed 3) of `r` with the tokenizer a Trainer of `r` trains in `dir`.
VisionLanguageModel micro_recipe_model(const TrainRecipe& r, const std::string& dir) {
  Trainer t(r, dir, RunContext{});  // trains the tokenizer
  auto tok = io::Tokenizer::load(dir + "/tokenizer.model");
  return VisionLanguageModel(r.model, random_llava_net(r.model, 3, at::kFloat), tok, RunContext{});
}

TEST(Training, ConversationLossFallsWhenFittingOneBatch) {
  auto r = micro_recipe();
  testing::TempDir tmp;
  auto m = micro_recipe_model(r, tmp.str("run"));
  std::vector<at::Tensor> px;
  std::vector<std::vector<std::pair<std::string, std::string>>> turns;
  for (uint64_t i = 0; i < 2; ++i) {
    auto s = make_sample(11, i);
    px.push_back(m.preprocess(s.rgb));
    turns.push_back({{s.question, s.answer}, {"How many squares are there?", "2"}});
  }
  auto images = at::stack(px);
  std::vector<at::Tensor> params;
  for (auto& p : m.net()->language_model->parameters()) params.push_back(p.set_requires_grad(true));
  for (auto& p : m.net()->multi_modal_projector->parameters()) params.push_back(p.set_requires_grad(true));
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-2));
  const double first = conversation_loss(m, images, turns).item<double>();
  double last = first;
  for (int i = 0; i < 10; ++i) {
    opt.zero_grad();
    auto loss = conversation_loss(m, images, turns);
    loss.backward();
    opt.step();
    last = loss.item<double>();
  }
  std::printf("conversation loss on one batch: %.3f -> %.3f\n", first, last);
  EXPECT_GT(first, 4.0);  // ≈ ln(448) at random init
  EXPECT_LT(last, 0.5 * first);
}

TEST(Training, ConversationLossOnKeptVisualTokensEqualsFeedingOnlyThem) {
  auto r = micro_recipe();
  testing::TempDir tmp;
  auto m = micro_recipe_model(r, tmp.str("run"));
  const auto& tok = m.tokenizer();
  auto s = make_sample(11, 0);
  auto images = m.preprocess(s.rgb).unsqueeze(0);
  std::vector<std::vector<std::pair<std::string, std::string>>> turns = {{{s.question, s.answer}}};
  at::NoGradGuard ng;
  const int64_t n_v = r.model.n_visual_tokens();
  // Every token, in a shuffled order: the loss restores the original order, so nothing changes.
  auto all = at::randperm(n_v, at::kLong).unsqueeze(0);
  EXPECT_NEAR(conversation_loss(m, images, turns, 1, all).item<double>(),
              conversation_loss(m, images, turns).item<double>(), 1e-5);
  // Ten tokens: the same as building the sequence by hand from those projected tokens.
  auto keep = at::tensor({500, 3, 77, 140, 9, 10, 300, 401, 575, 0}, at::kLong).unsqueeze(0);
  auto feats = m.net()->vision_tower->forward(images, r.model.n_vision_layers_used(), true).features;
  auto visual = m.net()->multi_modal_projector->forward(feats).index_select(1, std::get<0>(keep[0].sort()));
  VlmRequest req;
  req.prompt_ids = llava_prompt_ids(tok, s.question, r.model.image_token_index);
  auto ans = tok.encode(s.answer, false);
  ans.push_back(tok.eos_id());
  req.prompt_ids.insert(req.prompt_ids.end(), ans.begin(), ans.end());
  auto state = build_prefill_state(m, {req}, visual);
  KvCache cache(r.model.text.num_hidden_layers);
  auto logp = m.net()->language_model->logits(m.net()->language_model->forward(state, cache)).log_softmax(-1);
  const int64_t T = state.hidden.size(1), n_ans = static_cast<int64_t>(ans.size());
  double nll = 0;
  for (int64_t j = 0; j < n_ans; ++j) nll -= logp[0][T - n_ans - 1 + j][ans[j]].item<double>();
  EXPECT_NEAR(conversation_loss(m, images, turns, 1, keep).item<double>(), nll / n_ans, 1e-4);
}

TEST(Training, ResumeGivesTheSameNextStepLoss) {
  auto r = micro_recipe();
  r.vision.steps = 2;  // the checkpoint sits inside the decoder stage
  testing::TempDir tmp;
  double uninterrupted = 0;
  {
    Trainer t(r, tmp.str("a"), RunContext{});
    for (int i = 0; i < 3; ++i) t.step();
    t.save_checkpoint();
    uninterrupted = t.step().loss;
  }
  Trainer resumed(r, tmp.str("a"), RunContext{});
  const double again = resumed.step().loss;
  std::printf("next-step loss: uninterrupted %.8f, resumed %.8f\n", uninterrupted, again);
  EXPECT_NEAR(again, uninterrupted, 1e-6 * std::abs(uninterrupted));  // stated tolerance: 1e-6 relative
  // Another recipe cannot resume this run.
  auto other = r;
  other.seed = 99;
  EXPECT_THROW(Trainer(other, tmp.str("a"), RunContext{}), InvalidArgument);
}

// Issue 45 item 7: a run killed while publishing its checkpoint (here between the two renames of the
// rename-aside path: checkpoint/ moved to checkpoint.old/, and a later save's partial checkpoint.tmp/)
// resumes from the checkpoint, not from step 0, and takes the uninterrupted run's next step.
TEST(Training, AKillWhilePublishingTheCheckpointResumesFromIt) {
  namespace fs = std::filesystem;
  auto r = micro_recipe();
  r.vision.steps = 2;
  testing::TempDir tmp;
  const fs::path ckpt = tmp.path() / "a" / "checkpoint";
  double uninterrupted = 0;
  {
    Trainer t(r, tmp.str("a"), RunContext{});
    for (int i = 0; i < 3; ++i) t.step();
    t.save_checkpoint();
    uninterrupted = t.step().loss;
  }
  fs::rename(ckpt, ckpt.string() + ".old");
  fs::create_directories(ckpt.string() + ".tmp");
  std::ofstream(ckpt.string() + ".tmp/net.pt") << "partial";
  Trainer resumed(r, tmp.str("a"), RunContext{});
  EXPECT_TRUE(fs::exists(ckpt / "position.json"));
  EXPECT_FALSE(fs::exists(ckpt.string() + ".old"));
  const double again = resumed.step().loss;
  std::printf("next-step loss: uninterrupted %.8f, resumed after a kill %.8f\n", uninterrupted, again);
  EXPECT_NEAR(again, uninterrupted, 1e-6 * std::abs(uninterrupted));
}

// A recipe whose decoder stage trains a training-only head: its loss part is > 0 in the first decoder steps,
// the head is saved in the checkpoint (`file`), and a resumed run's next step loss equals the uninterrupted
// run's.
void expect_head_trains_and_resumes(const TrainRecipe& r, const std::string& file, double StepReport::*part) {
  testing::TempDir tmp;
  double uninterrupted = 0, seen = 0;
  {
    Trainer t(r, tmp.str("a"), RunContext{});
    for (int i = 0; i < 3; ++i) seen = std::max(seen, t.step().*part);
    t.save_checkpoint();
    uninterrupted = t.step().loss;
  }
  EXPECT_GT(seen, 0.0);  // the head's target occurred in the first decoder steps
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "a" / "checkpoint" / file));
  Trainer resumed(r, tmp.str("a"), RunContext{});
  const double again = resumed.step().loss;
  std::printf("next-step loss with %s: uninterrupted %.8f, resumed %.8f\n", file.c_str(), uninterrupted,
              again);
  EXPECT_NEAR(again, uninterrupted, 1e-6 * std::abs(uninterrupted));
}

// The micro recipe with `layers` decoder layers and a one-step vision stage.
TrainRecipe micro_with_layers(int64_t layers) {
  auto r = micro_recipe();
  r.model.text.num_hidden_layers = layers;
  r.vision.steps = 1;
  return r;
}

TEST(Training, ReadoutHeadTrainsAndResumesWithTheRun) {
  auto r = micro_with_layers(6);  // the readout reads after layer 4
  r.turns = 6;  // enough turns that spatial and counting questions (the readout's targets) occur
  r.decoder.answer_grounding = 1.0;
  r.decoder.readout = 1.0;
  r.decoder.steps = 6;
  expect_head_trains_and_resumes(r, "readout.pt", &StepReport::readout_loss);
}

TEST(Training, GlyphValueHeadTrainsAndResumesWithTheRun) {
  auto r = micro_with_layers(5);  // answer grounding at layer 3
  r.decoder.answer_grounding = 1.0;
  r.decoder.text_glyphs = true;
  r.decoder.glyph_value = 1.0;
  r.decoder.steps = 6;
  expect_head_trains_and_resumes(r, "glyph_value.pt", &StepReport::glyph_value_loss);
}

TEST(Training, ARefineStageWithTrainingOnlyHeadsAppendsToARunInterruptedMidStage) {
  auto r = micro_with_layers(6);  // answer grounding at layer 3, the readout after layer 4
  r.turns = 6;
  r.decoder.steps = 4;
  testing::TempDir tmp;
  {
    Trainer t(r, tmp.str("a"), RunContext{});
    for (int i = 0; i < 3; ++i) t.step();  // the vision step and half the decoder stage
    t.save_checkpoint();
  }
  // The same run with a stage appended that trains the readout and glyph value heads (recipe 12's shape): the
  // decoder stage's optimiser state, saved without those heads, still fits, and the appended stage trains
  // them.
  auto more = r;
  StageSettings text = r.decoder;
  text.steps = 2;
  text.answer_grounding = 1.0;
  text.text_glyphs = true;
  text.glyph_value = 1.0;
  text.readout = 1.0;
  more.refine = {text};
  Trainer resumed(more, tmp.str("a"), RunContext{});
  std::vector<StepReport> reports;
  while (!resumed.done()) reports.push_back(resumed.step());
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[0].glyph_value_loss, 0.0);  // the decoder stage has no glyph value loss
  EXPECT_EQ(reports[1].glyph_value_loss, 0.0);
  EXPECT_GT(reports[2].glyph_value_loss + reports[3].glyph_value_loss,
            0.0);  // a scene of the stage shows text
  EXPECT_EQ(reports[0].readout_loss + reports[1].readout_loss, 0.0);
  EXPECT_GT(reports[2].readout_loss + reports[3].readout_loss, 0.0);  // spatial or counting turns occur
}

TEST(SceneQuestions, IncludeTheGeneratorsOwnQuestionAndAnswer) {
  int checked = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    auto s = make_sample(4242, i);
    bool found = false;
    for (const auto& q : all_questions(s.scene))
      if (q.question == s.question) {
        EXPECT_EQ(q.answer, s.answer) << s.question;
        found = true;
      }
    // Every family is derivable from its own scene except exist-"no" on non-adversarial scenes, which
    // all_questions lists among the easy negatives.
    EXPECT_TRUE(found) << s.family << ": " << s.question;
    ++checked;
  }
  EXPECT_EQ(checked, 64);
}

TEST(SceneQuestions, SampleBalancesFamiliesAndYesNo) {
  auto s = make_sample(5, 3);
  Rng rng(1);
  auto qs = sample_questions(s.scene, rng, 12);
  std::set<std::string> fams;
  for (const auto& q : qs) fams.insert(q.family);
  EXPECT_GE(fams.size(), 5u);
}

TEST(SceneQuestions, TurnWeightsGiveAFamilyMoreTurnsAndNoWeightsChangeNothing) {
  size_t plain_counts = 0, weighted_counts = 0;
  for (uint64_t i = 0; i < 24; ++i) {
    auto s = make_sample(5, i);
    Rng a(7), b(7), c(7);
    const auto plain = sample_questions(s.scene, a, 15);
    const auto same = sample_questions(s.scene, b, 15, {});
    ASSERT_EQ(plain.size(), same.size());
    for (size_t k = 0; k < plain.size(); ++k) EXPECT_EQ(plain[k].question, same[k].question) << i << " " << k;
    const auto weighted = sample_questions(s.scene, c, 15, {{"count_shape", 3}, {"count_color", 3}});
    const auto counts = [](const std::vector<QaPair>& qs) {
      return std::count_if(qs.begin(), qs.end(),
                           [](const QaPair& q) { return q.family.rfind("count", 0) == 0; });
    };
    // Every count question the scene has, or 3 + 3 per cycle of at most 9 families: never fewer than plain.
    size_t available = 0;
    for (const auto& q : all_questions(s.scene)) available += q.family.rfind("count", 0) == 0;
    EXPECT_GE(counts(weighted), counts(plain)) << i;
    EXPECT_LE(static_cast<size_t>(counts(weighted)), available) << i;
    plain_counts += counts(plain);
    weighted_counts += counts(weighted);
  }
  std::printf("count turns in 24 scenes of 15 turns: %zu plain, %zu with weight 3\n", plain_counts,
              weighted_counts);
  EXPECT_GT(weighted_counts, plain_counts);  // measured 143 vs 86
}

TEST(PatchLabels, MarkObjectsAndTextWhereTheSceneDrawsThem) {
  Scene sc;
  SceneObject o;
  o.shape = Shape::kSquare;
  o.colour = Colour::kBlue;
  o.size = SizeClass::kLarge;
  o.x = 14 * 5 + 7;  // centre of patch (row 3, col 5)
  o.y = 14 * 3 + 7;
  o.radius = 28;
  sc.objects.push_back(o);
  SceneText t;
  t.text = "7K";
  t.color = ink_table()[1].name;
  t.x = 14 * 10;
  t.y = 14 * 20;
  t.w = 28;  // two patches wide: one character each
  t.h = 14;
  sc.texts.push_back(t);
  auto lab = patch_labels(sc, 24);
  auto at = [&](int r, int c, int col) { return lab[r * 24 + c][col].item<int64_t>(); };
  EXPECT_EQ(at(3, 5, 0), static_cast<int64_t>(Colour::kBlue) + 1);
  EXPECT_EQ(at(3, 5, 1), static_cast<int64_t>(Shape::kSquare) + 1);
  EXPECT_EQ(at(3, 5, 2), static_cast<int64_t>(SizeClass::kLarge) + 1);
  EXPECT_EQ(at(3, 5, 3), 1);
  EXPECT_EQ(at(3, 6, 3), 0);            // covered but not the centre
  EXPECT_EQ(at(3, 6, 0), at(3, 5, 0));  // 14 px away < 0.75 · 28
  EXPECT_EQ(at(3, 8, 0), 0);            // 42 px away > 21 px
  const std::string alphabet = kTextAlphabet;
  EXPECT_EQ(at(20, 10, 4), static_cast<int64_t>(alphabet.find('7')) + 1);
  EXPECT_EQ(at(20, 11, 4), static_cast<int64_t>(alphabet.find('K')) + 1);
  EXPECT_EQ(at(20, 11, 5), 2);
  EXPECT_EQ(at(20, 12, 4), 0);
}

// recipe_from_json() refuses the JSON form of `r` changed by `edit`.
void expect_refused(const TrainRecipe& r, const std::function<void(nlohmann::json&)>& edit) {
  auto j = to_json(r);
  edit(j);
  EXPECT_THROW(recipe_from_json(j), InvalidArgument) << j.dump();
}

TEST(TrainRecipe, RoundTripsAndRejectsBadFields) {
  auto r = micro_recipe();
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  expect_refused(r, [](nlohmann::json& j) { j["decoder"]["lr"] = -1; });
  expect_refused(r, [](nlohmann::json& j) { j["epochs"] = 3; });
}

TEST(TrainRecipe, LowResolutionStagesRoundTripAndCheckTheirPool) {
  auto r = micro_recipe();
  r.lowres = {{.steps = 3, .batch = 2, .pool = 4}, {.steps = 2, .batch = 2, .pool = 2}};
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  // 24 patches per side: 5 does not divide the grid.
  expect_refused(r, [](nlohmann::json& j) { j["lowres"][0]["pool"] = 5; });
  // The final stage trains at full resolution.
  expect_refused(r, [](nlohmann::json& j) { j["decoder"]["pool"] = 2; });
  expect_refused(r, [](nlohmann::json& j) { j["lowres"][1]["foreground_keep"] = 48; });  // needs pool 1
  auto j = to_json(r);
  j["lowres"][0]["pool"] = 1;
  j["lowres"][0]["foreground_keep"] = 577;  // more than N_v
  EXPECT_THROW(recipe_from_json(j), InvalidArgument);
  j["lowres"][0]["foreground_keep"] = 48;
  EXPECT_EQ(recipe_from_json(j).lowres[0].foreground_keep, 48);
  expect_refused(r, [](nlohmann::json& j) { j["lowres"] = j["lowres"][0]; });  // not a list
}

TEST(Training, LowResolutionStagesRunInOrderBeforeTheDecoderStage) {
  testing::TempDir tmp;
  auto r = micro_recipe();
  r.vision.steps = 1;
  r.lowres = {{.steps = 2, .batch = 1, .pool = 4}, {.steps = 1, .batch = 1, .pool = 2}};
  r.decoder.steps = 1;
  r.decoder.batch = 1;
  Trainer t(r, tmp.str("run"), RunContext{});
  std::vector<std::string> stages;
  while (!t.done()) stages.push_back(t.step().stage);
  EXPECT_EQ(stages, (std::vector<std::string>{"vision", "decoder-pool4", "decoder-pool4", "decoder-pool2",
                                              "decoder"}));
}

TEST(TrainRecipe, RefineStagesRoundTripAndTrainAtFullResolution) {
  auto r = micro_recipe();
  r.refine = {{.steps = 2, .batch = 1, .lr = 1e-4, .warmup = 0.0}};
  EXPECT_EQ(recipe_from_json(to_json(r)), r);
  EXPECT_FALSE(to_json(micro_recipe()).contains("refine"));  // older recipes serialise as before
  expect_refused(r, [](nlohmann::json& j) { j["refine"][0]["pool"] = 2; });
  expect_refused(r, [](nlohmann::json& j) { j["refine"][0]["foreground_keep"] = 48; });
  expect_refused(r, [](nlohmann::json& j) { j["refine"] = j["refine"][0]; });  // not a list
}

// The micro recipe cut to a few steps at decoder batch 1, probed every 2 decoder steps on one sample a
// family.
TrainRecipe probed_run(int64_t vision_steps, int64_t decoder_steps) {
  auto r = micro_recipe();
  r.vision.steps = vision_steps;
  r.decoder.steps = decoder_steps;
  r.decoder.batch = 1;
  r.probe_every = 2;
  r.probe_per_family = 1;
  return r;
}

TEST(Training, RefineStagesRunAfterTheDecoderStageAndExtendAFinishedRun) {
  testing::TempDir tmp;
  auto r = probed_run(1, 1);
  {
    Trainer t(r, tmp.str("run"), RunContext{});
    while (!t.done()) t.step();
    t.save_checkpoint();
  }
  // The finished run continues with two refine stages appended; each restarts its own schedule (no warm-up:
  // the first step runs at the stage's peak lr).
  auto more = r;
  more.refine = {{.steps = 2, .batch = 1, .lr = 3e-4, .warmup = 0.0},
                 {.steps = 1, .batch = 1, .lr = 1e-4, .warmup = 0.0}};
  more.probe_gates = {{.decoder_step = 3, .min_accuracy = 0.0}};  // a gate inside the appended stages
  Trainer t(more, tmp.str("run"), RunContext{});
  ASSERT_FALSE(t.done());
  std::vector<double> lrs;
  while (!t.done()) {
    auto rep = t.step();
    EXPECT_EQ(rep.stage, "decoder");
    lrs.push_back(rep.lr);
  }
  ASSERT_EQ(lrs.size(), 3u);
  EXPECT_DOUBLE_EQ(lrs[0], 3e-4);
  EXPECT_DOUBLE_EQ(lrs[2], 1e-4);
  // A checkpoint of another recipe is still refused.
  t.save_checkpoint();
  auto other = more;
  other.decoder.lr *= 2;
  EXPECT_THROW(Trainer(other, tmp.str("run"), RunContext{}), InvalidArgument);
  other = more;
  other.probe_gates.push_back({.decoder_step = 1, .min_accuracy = 0.0});  // a gate in the stages already run
  EXPECT_THROW(Trainer(other, tmp.str("run"), RunContext{}), InvalidArgument);
}

// A tower-only run (finished, or stopped inside its vision stage) continues with decoder stages on the same
// tower, and its first decoder step is the one a from-scratch run of the full recipe takes after its vision
// stage. The tower-only recipe keeps the full recipe's probe gate (beyond its own steps) and still resumes.
TEST(Training, ATowerOnlyRunContinuesWithDecoderStagesAsAFromScratchRunWould) {
  auto full = probed_run(2, 2);
  full.probe_gates = {{.decoder_step = 2, .min_accuracy = 0.0}};
  testing::TempDir tmp;
  double from_scratch = 0;
  {
    Trainer t(full, tmp.str("scratch"), RunContext{});
    t.step();
    t.step();  // the two vision steps
    from_scratch = t.step().loss;
  }
  auto tower = full;
  tower.decoder.steps = 0;
  for (const char* run : {"finished", "mid-vision"}) {
    {
      Trainer t(tower, tmp.str(run), RunContext{});
      t.step();
      t.save_checkpoint();
    }
    if (std::string(run) == "finished") {
      Trainer t(tower, tmp.str(run), RunContext{});  // the same recipe resumes despite its gate at step 2
      while (!t.done()) t.step();
      t.save_checkpoint();
    }
    Trainer continued(full, tmp.str(run), RunContext{});
    ASSERT_FALSE(continued.done());
    auto r = continued.step();
    if (r.stage == "vision") r = continued.step();  // the mid-vision run finishes its tower first
    EXPECT_EQ(r.stage, "decoder") << run;
    EXPECT_NEAR(r.loss, from_scratch, 1e-6 * std::abs(from_scratch))
        << run;  // stated tolerance: 1e-6 relative
  }
  // Another tower cannot continue it.
  auto other = full;
  other.vision.lr *= 2;
  EXPECT_THROW(Trainer(other, tmp.str("finished"), RunContext{}), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
