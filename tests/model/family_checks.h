// The end-to-end checks every test family goes through (issue 44's seam): a dataset whose answers are the
// family model's own greedy outputs, evaluation and a min-K search over it, and a served chat completion
// compared with generate(). Used by test_model_family.cpp and test_family_layouts.cpp.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/dataset.h"
#include "eval/eval_fixture.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "io/image.h"
#include "model/generate.h"
#include "optimize/min_k.h"
#include "optimize/plan_evaluator.h"
#include "optimize/plan_template.h"
#include "prune/plan_hook.h"
#include "serve/server_fixture.h"

namespace vispco::testing {

/// Writes dir/data.jsonl over the images at `images` (paths relative to dir): questions test_question(i),
/// answers the model's own greedy outputs (one image at a time), ids id_prefix + i, families "x" and "y".
inline void write_own_answers_dataset(VisionLanguageModel& m, const std::filesystem::path& dir,
                                      const std::vector<std::string>& images, const std::string& id_prefix) {
  std::ofstream out(dir / "data.jsonl");
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string q = test_question(int(i));
    VlmRequest req{m.preprocess(io::load_image_rgb((dir / images[i]).string())), m.prompt_ids(q)};
    const auto answer = generate(m, {req}, eval::default_eval_generation()).texts[0];
    out << nlohmann::json{{"id", id_prefix + std::to_string(i)},
                          {"image", images[i]},
                          {"question", q},
                          {"answer", answer},
                          {"family", i % 2 ? "x" : "y"}}
               .dump()
        << "\n";
  }
}

/// Evaluates the 6-sample own-answers dataset at `ds_dir` unpruned (accuracy 1; `why` says why) and with
/// divprune:keep=4 in batches of 3, then min-K searches fastv:layer=2 over it (ε = 0) and checks the chosen K
/// keeps accuracy 1.
inline void expect_evaluates_and_searches(VisionLanguageModel& m, const std::string& model_dir,
                                          const std::filesystem::path& ds_dir, const std::string& why) {
  const auto hash = eval::model_folder_hash(model_dir);
  const auto ds = eval::load_dataset(ds_dir.string());
  TempDir tmp;
  eval::EvalOptions o;
  o.store_path = tmp.str("store.sqlite");
  o.batch_size = 3;
  const auto none = eval::evaluate_plan(m, hash, ds, o, PruningPlan{}, ScorerEnv{});
  EXPECT_EQ(none.n_evaluated, 6u);
  EXPECT_DOUBLE_EQ(none.metrics.overall.accuracy(), 1.0) << why;
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

/// Serves `model` and posts one chat completion ("How many cubes?" about the image `png`, 5 tokens, `plan`):
/// the reply is what generate() answers with that plan, and it kept `n_kept` visual tokens.
inline void expect_serves_as_generate(VisionLanguageModel model, const std::string& model_dir,
                                      const std::string& png, const std::string& plan, int64_t n_kept) {
  ServerFixture f(std::move(model), model_dir, {}, {});
  auto c = f.client();
  auto body = chat_body("How many cubes?", png, 5);
  body["vispco"] = {{"plan", plan}};
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto reply = nlohmann::json::parse(res->body);
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  auto& m = f.model();
  PlanHook hook(parse_plan(plan, m.shape()), m.shape());
  const auto want =
      generate(m, {{m.preprocess(io::decode_image_rgb(png)), m.prompt_ids("How many cubes?")}}, gc, &hook);
  EXPECT_EQ(reply["choices"][0]["message"]["content"], want.texts[0]);
  EXPECT_EQ(reply["vispco"]["kept_visual_tokens"], n_kept);
}

}  // namespace vispco::testing
