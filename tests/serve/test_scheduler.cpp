// The batch scheduler's continuous batching on the tiny model: a same-plan request that arrives while a batch
// decodes joins it between steps and answers what it answers alone; a request of another plan never joins,
// and neither does a same-plan request queued behind it (it would overtake); --no-continuous-batching turns
// admission off. Each newcomer is submitted from the running job's first streamed delta, so it arrives while
// that job still has tokens to generate.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <optional>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "serve/api_error.h"
#include "serve/scheduler.h"

namespace vispco {
namespace {

using testing::test_pixels;

serve::GenerationJob job(VisionLanguageModel& m, uint64_t seed, const std::string& question,
                         int64_t max_tokens, const std::string& plan = "") {
  serve::GenerationJob j;
  j.request = {test_pixels(56, seed), m.prompt_ids(question)};
  j.gen.max_new_tokens = max_tokens;
  j.gen.stop_at_eos = false;
  j.plan = plan;
  j.question = question;
  return j;
}

std::vector<int64_t> alone(VisionLanguageModel& m, const serve::GenerationJob& j, const std::string& plan) {
  PlanHook hook(parse_plan(plan, m.shape()), m.shape(), 0, ScorerEnv{testing::tiny_model_dir()});
  return generate(m, {j.request}, j.gen, hook.plan().empty() ? nullptr : &hook).tokens[0];
}

// Four decode rows and no batch window: a newcomer's admission depends only on when it is queued.
serve::SchedulerOptions options() {
  serve::SchedulerOptions so;
  so.max_batch = 4;
  so.batch_window_ms = 0;
  return so;
}

struct Run {
  serve::JobResult first;
  std::vector<serve::JobResult> later;
};

// Submits `first`; at its first streamed delta submits `later` in order, then waits for every answer.
Run run(serve::BatchScheduler& s, serve::GenerationJob first, std::vector<serve::GenerationJob> later) {
  std::vector<std::future<serve::JobResult>> futures;
  bool sent = false;
  first.on_delta = [&](const std::string&) {
    if (!sent) {
      sent = true;
      for (auto& j : later) futures.push_back(s.submit(std::move(j)));
    }
    return true;
  };
  Run r;
  r.first = s.submit(std::move(first)).get();
  for (auto& f : futures) r.later.push_back(f.get());
  return r;
}

TEST(Scheduler, SamePlanNewcomerJoinsTheRunningDecodeAndAnswersAsAlone) {
  auto m = testing::load_tiny();
  auto so = options();
  serve::BatchScheduler s(m, testing::tiny_model_dir(), so, nullptr);
  auto a = job(m, 41, "How many cubes?", 40);
  auto b = job(m, 42, "What does the text say above the green cone on the left?", 6);
  const auto want_a = alone(m, a, "none"), want_b = alone(m, b, "none");
  const auto r = run(s, a, {b});
  ASSERT_TRUE(r.first.error.empty()) << r.first.error;
  ASSERT_EQ(r.later.size(), 1u);
  ASSERT_TRUE(r.later[0].error.empty()) << r.later[0].error;
  EXPECT_EQ(r.first.tokens, want_a);
  EXPECT_EQ(r.later[0].tokens, want_b);
  EXPECT_EQ(r.later[0].batch_size, 1);         // prefilled on its own
  EXPECT_EQ(r.later[0].decode_batch_size, 2);  // then decoded beside the running request
  EXPECT_EQ(r.first.decode_batch_size, 2);
  EXPECT_EQ(r.first.finish_reason, "length");
}

TEST(Scheduler, NoNewcomerOvertakesARequestOfAnotherPlan) {
  auto m = testing::load_tiny();
  auto so = options();
  serve::BatchScheduler s(m, testing::tiny_model_dir(), so, nullptr);
  auto a = job(m, 51, "How many cubes?", 30);
  auto c = job(m, 52, "What colour?", 5, "divprune:keep=4");  // another plan: waits for the batch to drain
  auto d = job(m, 53, "What shape is the red object?", 5);    // A's plan, but queued behind C
  const auto want_c = alone(m, c, "divprune:keep=4"), want_d = alone(m, d, "none");
  const auto r = run(s, a, {c, d});
  ASSERT_EQ(r.later.size(), 2u);
  EXPECT_EQ(r.first.decode_batch_size, 1);
  EXPECT_EQ(r.later[0].tokens, want_c);
  EXPECT_EQ(r.later[0].n_visual_kept, 4);
  EXPECT_EQ(r.later[1].tokens, want_d);
  EXPECT_EQ(r.later[1].n_visual_kept, 16);
  // C and D have different plans: each decodes without the other (D's prefill starts after C's batch).
  EXPECT_EQ(r.later[0].decode_batch_size, 1);
  EXPECT_EQ(r.later[1].decode_batch_size, 1);
}

TEST(Scheduler, AdmissionOffRunsEachBatchToItsEnd) {
  auto m = testing::load_tiny();
  auto so = options();
  so.continuous = false;
  serve::BatchScheduler s(m, testing::tiny_model_dir(), so, nullptr);
  auto a = job(m, 61, "How many cubes?", 30);
  auto b = job(m, 62, "What colour?", 5);
  const auto want_b = alone(m, b, "none");
  const auto r = run(s, a, {b});
  ASSERT_EQ(r.later.size(), 1u);
  EXPECT_EQ(r.first.decode_batch_size, 1);
  EXPECT_EQ(r.later[0].decode_batch_size, 1);
  EXPECT_EQ(r.later[0].tokens, want_b);
}

// Two same-plan newcomers queued together join in one prefill; under a prefill token budget that holds one
// request they are prefilled one by one and still decode together.
TEST(Scheduler, PrefillTokenBudgetPrefillsNewcomersOneByOne) {
  auto m = testing::load_tiny();
  for (const int64_t budget : {0, 40}) {
    auto so = options();
    so.max_prefill_tokens = budget;
    serve::BatchScheduler s(m, testing::tiny_model_dir(), so, nullptr);
    auto a = job(m, 71, "How many cubes?", 30);
    auto b = job(m, 72, "What colour?", 5), c = job(m, 73, "What shape?", 5);
    // 16 visual + their text tokens each: B and C together do not fit in 40, each alone does.
    const auto tokens = [&](const serve::GenerationJob& j) {
      return m.shape().n_visual_tokens + static_cast<int64_t>(j.request.prompt_ids.size()) - 1;
    };
    ASSERT_GT(tokens(b) + tokens(c), 40);
    ASSERT_LE(std::max(tokens(b), tokens(c)), 40);
    const auto want_b = alone(m, b, "none"), want_c = alone(m, c, "none");
    const auto r = run(s, a, {b, c});
    ASSERT_EQ(r.later.size(), 2u);
    EXPECT_EQ(r.later[0].batch_size, budget == 0 ? 2 : 1) << budget;
    EXPECT_EQ(r.later[1].batch_size, budget == 0 ? 2 : 1) << budget;
    EXPECT_EQ(r.first.decode_batch_size, 3) << budget;
    EXPECT_EQ(r.later[0].tokens, want_b) << budget;
    EXPECT_EQ(r.later[1].tokens, want_c) << budget;
  }
  serve::SchedulerOptions bad;
  bad.max_prefill_tokens = -1;
  EXPECT_THROW(bad.validate(), InvalidArgument);
}

// Stopping drains: a running request, one that joins it and one of another plan queued behind are all
// answered in full before drain_and_stop() returns; later submissions get 503.
TEST(Scheduler, DrainAndStopAnswersRunningAndQueuedJobs) {
  auto m = testing::load_tiny();
  auto so = options();
  serve::BatchScheduler s(m, testing::tiny_model_dir(), so, nullptr);
  auto a = job(m, 81, "How many cubes?", 20), b = job(m, 82, "What colour?", 8);
  auto c = job(m, 83, "What shape?", 8, "divprune:keep=4");
  const auto want_a = alone(m, a, "none"), want_b = alone(m, b, "none"),
             want_c = alone(m, c, "divprune:keep=4");
  auto fa = s.submit(a), fb = s.submit(b), fc = s.submit(c);
  s.drain_and_stop();
  for (auto* f : {&fa, &fb, &fc}) ASSERT_EQ(f->wait_for(std::chrono::seconds(0)), std::future_status::ready);
  const auto ra = fa.get(), rb = fb.get(), rc = fc.get();
  EXPECT_EQ(ra.tokens, want_a);
  EXPECT_EQ(rb.tokens, want_b);
  EXPECT_EQ(rc.tokens, want_c);
  EXPECT_THROW(s.submit(job(m, 84, "What colour?", 2)), serve::ApiError);
}

}  // namespace
}  // namespace vispco
