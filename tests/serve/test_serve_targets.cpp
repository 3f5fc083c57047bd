// Serving by targets, shadow monitoring, the guard and cost counters (issue 49), on the bundled model
// (models/synthvqa-small) over loopback HTTP: a target runs the plan a hand-written frontier says, judged by
// the stored bound; unmeetable and malformed targets are 400s; shadowed replies equal unshadowed ones and the
// /metrics counts equal a hand count; the Wilson bound matches an independent computation; a bad default plan
// is replaced within the stated samples and a good one is not; the FLOPs counters add up.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "core/context.h"
#include "core/errors.h"
#include "eval/dataset.h"
#include "eval/run_key.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/splits.h"
#include "serve/plan_policy.h"
#include "server_fixture.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

using nlohmann::json;
const std::string kModel = std::string(::vispco::testing::source_dir()) + "/models/synthvqa-small";

// A frontier whose picks are known by hand (FLOPs ratio, accuracy, loss bound; the unpruned accuracy 0.88):
//   random:keep=64           0.32  0.50  —      loss 0.38 (point estimate: no bound stored)
//   fastv:layer=2,keep=144   0.40  0.80  0.11
//   fastv:layer=2,keep=200   0.45  0.85  0.08   (point loss 0.03: a point-estimate rule would pick it at
//   0.05) divprune:keep=288        0.57  0.86  0.035 none                     1.00  0.88  —
json frontier_json(const std::string& model_hash) {
  const auto point = [](const std::string& plan, double flops, double acc, double upper) {
    json p = {{"plan", plan}, {"flops_ratio", flops}, {"accuracy", acc}, {"n", 500}};
    if (upper >= 0) p["loss_bound"] = {{"upper", upper}, {"confidence", 0.9}, {"method", "clopper-pearson"}};
    return p;
  };
  return {{"inputs", {{"model", "models/synthvqa-small"}, {"model_hash", model_hash}}},
          {"calibration",
           {{"points",
             json::array({point("none", 1.0, 0.88, -1), point("fastv:layer=2,keep=144", 0.40, 0.80, 0.11),
                          point("random:keep=64", 0.32, 0.50, -1),
                          point("fastv:layer=2,keep=200", 0.45, 0.85, 0.08),
                          point("divprune:keep=288", 0.57, 0.86, 0.035)})}}}};
}

// One SynthVQA test-split slice, written once per test binary.
const eval::Dataset& test_slice() {
  static const eval::Dataset ds = [] {
    static testing::TempDir tmp;
    eval::synthvqa::SynthOptions so;
    so.seed = eval::synthvqa::find_split("test").seed;
    so.count = 40;  // sample i depends only on (seed, i): the test split's first 40 samples
    so.n_threads = 1;
    eval::synthvqa::generate_synthvqa(so, tmp.str("slice"));
    return eval::load_dataset(tmp.str("slice"));
  }();
  return ds;
}

json sample_body(const eval::Sample& s, int max_tokens = 6) {
  return testing::chat_body(s.question, testing::read_file(s.image_path), max_tokens);
}

// The serving stack on the bundled model with a plan policy.
class TargetServer {
 public:
  TargetServer(serve::SchedulerOptions sched, serve::PolicyOptions popts) {
    RunContext ctx;
    ctx.n_threads = 1;
    apply_threads(ctx);
    model_ = std::make_unique<VisionLanguageModel>(VisionLanguageModel::load(kModel, ctx));
    serve::declare_server_metrics(metrics_);
    scheduler_ = std::make_unique<serve::BatchScheduler>(*model_, kModel, sched, &metrics_);
    policy_ = std::make_unique<serve::PlanPolicy>(*scheduler_, &metrics_, std::move(popts),
                                                  [this](const std::string& l) { log_.push_back(l); });
    serve::ServerOptions opts;
    opts.port = 0;
    opts.model_name = "tiny";
    server_ = std::make_unique<serve::ChatServer>(*model_, *scheduler_, metrics_, opts, policy_.get());
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->listen(); });
  }
  ~TargetServer() {
    server_->stop();
    thread_.join();
    scheduler_->drain_and_stop();
  }
  json post(const json& body, int* status) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!res) return {{"transport_error", static_cast<int>(res.error())}};
    *status = res->status;
    return json::parse(res->body);
  }
  std::string metrics_text() {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get("/metrics");
    return res ? res->body : "";
  }
  serve::BatchScheduler& scheduler() { return *scheduler_; }
  serve::Metrics& metrics() { return metrics_; }
  int port() const { return port_; }
  const std::vector<std::string>& log() const { return log_; }

 private:
  std::unique_ptr<VisionLanguageModel> model_;
  serve::Metrics metrics_;
  std::unique_ptr<serve::BatchScheduler> scheduler_;
  std::unique_ptr<serve::PlanPolicy> policy_;
  std::unique_ptr<serve::ChatServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::vector<std::string> log_;
};

serve::PolicyOptions with_frontier() {
  serve::PolicyOptions p;
  p.frontier = serve::Frontier::from_json(frontier_json(""), "test frontier");
  return p;
}

// Independent Wilson lower bound: the smaller root of (p̂ − q)² = z² q(1 − q)/n in q (the upper bound is
// the larger root).
double wilson_ref(double k, double n, double z) {
  if (n == 0) return 0;
  const double p = k / n, a = 1 + z * z / n, b = -(2 * p + z * z / n), c = p * p;
  return (-b - std::sqrt(b * b - 4 * a * c)) / (2 * a);
}

TEST(ServeTargets, FrontierPicksByBoundAndCapAndRefusesBadFiles) {
  const auto f = serve::Frontier::from_json(frontier_json(""), "t");
  serve::Target loss5;
  loss5.max_accuracy_loss = 0.05;
  EXPECT_EQ(f.pick(loss5)->plan, "divprune:keep=288");  // 0.035 ≤ 0.05; keep=200's bound 0.08 is not
  serve::Target loss12;
  loss12.max_accuracy_loss = 0.12;
  EXPECT_EQ(f.pick(loss12)->plan, "fastv:layer=2,keep=144");  // 0.11, the cheapest under 0.12
  serve::Target cap;
  cap.max_flops_ratio = 0.42;
  EXPECT_EQ(f.pick(cap)->plan, "fastv:layer=2,keep=144");  // most accurate within 0.42 (random:64 is cheaper)
  serve::Target both;
  both.max_accuracy_loss = 0.1;
  both.max_flops_ratio = 0.5;
  EXPECT_EQ(f.pick(both)->plan, "fastv:layer=2,keep=200");
  serve::Target tight;
  tight.max_flops_ratio = 0.2;
  EXPECT_EQ(f.pick(tight), nullptr);
  EXPECT_EQ(f.closest(tight).plan, "random:keep=64");
  both.max_accuracy_loss = 0.01;
  EXPECT_EQ(f.pick(both), nullptr);
  // Only none meets 0.01, and it is over the 0.5 cap: the lowest bound within the cap (divprune's 0.57 is
  // not).
  EXPECT_EQ(f.closest(both).plan, "fastv:layer=2,keep=200");
  // Bad files: one line each.
  EXPECT_THROW(serve::Frontier::from_json(json::array(), "x"), ConfigError);
  json no_ref = frontier_json("");
  no_ref["calibration"]["points"].erase(0);
  EXPECT_THROW(serve::Frontier::from_json(no_ref, "x"), ConfigError);
  json bad_point = frontier_json("");
  bad_point["calibration"]["points"][1]["flops_ratio"] = "cheap";
  EXPECT_THROW(serve::Frontier::from_json(bad_point, "x"), ConfigError);
  const auto other = serve::Frontier::from_json(frontier_json("sha256:other"), "x");
  try {
    other.check_model("sha256:mine", "models/m");
    ADD_FAILURE() << "another model's frontier accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  testing::TempDir tmp;
  std::ofstream(tmp / "bad.json") << "{\"calibration\": ";
  EXPECT_THROW(serve::Frontier::load(tmp / "bad.json"), ConfigError);
}

TEST(ServeTargets, CliRefusesAMalformedOrForeignFrontierWithOneLine) {
  testing::TempDir tmp;
  std::ofstream(tmp / "bad.json") << "not json";
  std::ofstream(tmp / "other.json") << frontier_json("sha256:0000").dump();
  for (const std::string file : {"bad.json", "other.json"}) {
    const auto r = testing::run_cli("serve --model " + kModel + " --port 0 --frontier " + (tmp / file));
    EXPECT_NE(r.exit_code, 0) << file;
    EXPECT_NE(r.err.find("--frontier"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(Shadow, WilsonLowerBoundMatchesAnIndependentComputation) {
  EXPECT_NEAR(serve::wilson_lower(8, 10, 1.96), 0.4902, 5e-5);  // tabulated value
  EXPECT_NEAR(serve::wilson_lower(10, 10, 1.96), 10 / (10 + 1.96 * 1.96), 1e-12);
  EXPECT_EQ(serve::wilson_lower(0, 0, 1.96), 0);
  for (int n : {1, 7, 30, 200})
    for (int k = 0; k <= n; k += std::max(1, n / 5))
      EXPECT_NEAR(serve::wilson_lower(k, n, 1.96), wilson_ref(k, n, 1.96), 1e-12) << k << "/" << n;
  EXPECT_THROW(serve::wilson_lower(3, 2, 1.96), InvalidArgument);
  // The upper end: the larger root; by symmetry 1 − the lower bound of the failures.
  EXPECT_NEAR(serve::wilson_upper(2, 10, 1.96), 1 - 0.4902, 5e-5);
  EXPECT_NEAR(serve::wilson_upper(3, 10, 1.96), 1 - wilson_ref(7, 10, 1.96), 1e-12);
  EXPECT_EQ(serve::wilson_upper(0, 0, 1.96), 1);
}

// The fallback order on the hand-written frontier, with agreement counts fed by hand (no model): a tripped
// plan moves to the cheapest plan with a lower judged loss that has not tripped, then on down to none.
TEST(Guard, FallsBackToTheNextSaferFrontierPlanAfterTheMinimumSamples) {
  const auto f = serve::Frontier::from_json(frontier_json(""), "t");
  serve::Metrics m;
  serve::declare_server_metrics(m);
  serve::ShadowMonitor mon({}, &m);
  serve::GuardOptions go;
  go.epsilon = 0.25;
  go.min_samples = 10;
  std::vector<std::string> log;
  serve::Guard g(go, mon, &f, &m, [&](const std::string& l) { log.push_back(l); });
  const std::string p144 = "fastv:layer=2,keep=144", p200 = "fastv:layer=2,keep=200";
  for (int i = 0; i < 9; ++i) mon.record(p144, false);
  EXPECT_EQ(g.route(p144), p144);  // 0 of 9: under the minimum, not judged yet
  mon.record(p144, false);
  EXPECT_EQ(g.route(p144), p200);  // 0 of 10: upper bound 0.278 < 0.75; keep=200's 0.08 < 0.11
  EXPECT_EQ(g.route(p144), p200);
  EXPECT_EQ(log.size(), 1u);
  for (int i = 0; i < 10; ++i) mon.record(p200, true);
  EXPECT_EQ(g.route(p200), p200);  // 10 of 10 agree: kept
  for (int i = 0; i < 30; ++i) mon.record(p200, false);
  EXPECT_EQ(g.route(p144), "divprune:keep=288");  // 10 of 40 (upper 0.40): keep=200 trips too
  EXPECT_EQ(g.route(p200), "divprune:keep=288");
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(m.value("vispco_guard_fallbacks_total", {{"from", p144}, {"to", p200}}), 2);
  EXPECT_EQ(m.value("vispco_guard_fallbacks_total", {{"from", p144}, {"to", "divprune:keep=288"}}), 1);
  EXPECT_EQ(m.value("vispco_guard_trips_total", {{"plan", p200}}), 1);
  EXPECT_EQ(g.route("random:keep=5"), "random:keep=5");  // no samples: untouched
  EXPECT_EQ(g.route("none"), "none");
}

TEST(ServeTargets, TargetRequestsRunTheFrontierPlanAndSayWhatItPromised) {
  serve::SchedulerOptions so;
  so.max_batch = 1;
  TargetServer srv(so, with_frontier());
  const auto& s = test_slice().samples[0];
  const std::map<std::string, json> cases = {
      {"divprune:keep=288", {{"max_accuracy_loss", 0.05}}},
      {"fastv:layer=2,keep=144", {{"max_flops_ratio", 0.42}}},
      {"fastv:layer=2,keep=200", {{"max_accuracy_loss", 0.1}, {"max_flops_ratio", 0.5}}}};
  for (const auto& [plan, target] : cases) {
    json body = sample_body(s);
    body["vispco"] = target;
    int status = 0;
    const json r = srv.post(body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const std::string canonical = srv.scheduler().resolve_plan(plan);
    EXPECT_EQ(r["vispco"]["plan"], canonical);
    EXPECT_EQ(r["vispco"]["plan_source"], "request_target");
    EXPECT_EQ(r["vispco"]["promised"]["plan"], canonical);
    EXPECT_EQ(r["vispco"]["target"], target);
    // The plan really ran: the same answer and kept-token count as a request naming it.
    json named = sample_body(s);
    named["vispco"] = {{"plan", plan}};
    const json n = srv.post(named, &status);
    ASSERT_EQ(status, 200) << n.dump();
    EXPECT_EQ(r["choices"][0]["message"]["content"], n["choices"][0]["message"]["content"]) << plan;
    EXPECT_EQ(r["vispco"]["kept_visual_tokens"], n["vispco"]["kept_visual_tokens"]) << plan;
    EXPECT_EQ(n["vispco"]["plan_source"], "request");
  }
  json body = sample_body(s);
  body["vispco"] = {{"max_accuracy_loss", 0.05}};
  int status = 0;
  json r = srv.post(body, &status);
  EXPECT_DOUBLE_EQ(r["vispco"]["promised"]["accuracy_loss_bound"].get<double>(), 0.035);
  EXPECT_NEAR(r["vispco"]["promised"]["accuracy_loss"].get<double>(), 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(r["vispco"]["promised"]["flops_ratio"].get<double>(), 0.57);
  EXPECT_EQ(r["vispco"]["kept_visual_tokens"], 288);
  // Streamed: the last chunk's vispco block says the same.
  {
    httplib::Client c("127.0.0.1", srv.port());
    c.set_read_timeout(120, 0);
    body["stream"] = true;
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    const auto events = testing::sse_events(res->body);
    ASSERT_GE(events.size(), 2u) << res->body;
    const json last = json::parse(events[events.size() - 2]);
    EXPECT_EQ(last["vispco"]["plan"], srv.scheduler().resolve_plan("divprune:keep=288")) << last.dump();
    EXPECT_EQ(last["vispco"]["plan_source"], "request_target");
    body.erase("stream");
  }
  // Unmeetable: 400 naming the closest plan.
  body["vispco"] = {{"max_flops_ratio", 0.2}};
  r = srv.post(body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find(srv.scheduler().resolve_plan("random:keep=64")),
            std::string::npos)
      << r.dump();
  // Malformed vispco fields: 400 with one message each; the server goes on answering.
  for (const json& bad : {json{{"max_accuracy_loss", "small"}}, json{{"max_accuracy_loss", 1.5}},
                          json{{"max_flops_ratio", 0}}, json{{"plan", "none"}, {"max_flops_ratio", 0.5}}}) {
    body["vispco"] = bad;
    r = srv.post(body, &status);
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_EQ(r["error"]["param"], "vispco") << r.dump();
  }
  body["vispco"] = {{"max_accuracy_loss", 0.05}};
  srv.post(body, &status);
  EXPECT_EQ(status, 200);
}

TEST(ServeTargets, ServerDefaultTargetAppliesToRequestsNamingNothing) {
  auto p = with_frontier();
  p.default_target.max_accuracy_loss = 0.12;
  TargetServer srv({}, std::move(p));
  int status = 0;
  const json r = srv.post(sample_body(test_slice().samples[1]), &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["vispco"]["plan"], srv.scheduler().resolve_plan("fastv:layer=2,keep=144"));
  EXPECT_EQ(r["vispco"]["plan_source"], "server_target");
  // A default target no plan meets is refused at start, naming the closest.
  auto q = with_frontier();
  q.default_target.max_flops_ratio = 0.1;
  EXPECT_THROW(TargetServer({}, std::move(q)), InvalidArgument);
}

// Shadow at rate 1 on a pruned default plan: replies equal a shadow-free server's; the counts equal the hand
// count of (pruned answer == unpruned answer); the bound gauge equals the independent Wilson formula.
TEST(Shadow, ShadowedRepliesEqualUnshadowedOnesAndMetricsEqualAHandCount) {
  const std::string plan = "fastv:layer=2,keep=64";
  const size_t n = 12;
  serve::SchedulerOptions so;
  so.max_batch = 1;  // every run alone: a shadow's answer is the unpruned answer a request gets
  so.default_plan = plan;
  so.price_per_pflop = 2.5;
  serve::PolicyOptions p;
  p.shadow.rate = 1;
  std::vector<std::string> shadowed, plain, unpruned;
  std::string canonical;
  {
    TargetServer srv(so, p);
    canonical = srv.scheduler().resolve_plan("");
    for (size_t i = 0; i < n; ++i) {
      int status = 0;
      const json r = srv.post(sample_body(test_slice().samples[i]), &status);
      ASSERT_EQ(status, 200) << r.dump();
      EXPECT_EQ(r["vispco"]["shadowed"], true);
      shadowed.push_back(r["choices"][0]["message"]["content"]);
    }
    srv.scheduler().wait_idle(true);
    const auto c_samples = srv.metrics().value("vispco_shadow_samples_total", {{"plan", canonical}});
    const auto c_agree = srv.metrics().value("vispco_shadow_agreements_total", {{"plan", canonical}});
    // The hand count: each sample's unpruned answer, asked by name on a server without shadows.
    serve::SchedulerOptions so0 = so;
    TargetServer ref(so0, {});
    size_t agree = 0;
    for (size_t i = 0; i < n; ++i) {
      int status = 0;
      json b = sample_body(test_slice().samples[i]);
      json r = ref.post(b, &status);
      EXPECT_EQ(r["vispco"]["shadowed"], false);
      plain.push_back(r["choices"][0]["message"]["content"]);
      b["vispco"] = {{"plan", "none"}};
      r = ref.post(b, &status);
      unpruned.push_back(r["choices"][0]["message"]["content"]);
      agree += plain[i] == unpruned[i];
    }
    EXPECT_EQ(shadowed, plain);
    EXPECT_EQ(c_samples, static_cast<double>(n));
    EXPECT_EQ(c_agree, static_cast<double>(agree));
    std::printf("shadow: %zu of %zu answers of %s agree with unpruned\n", agree, n, canonical.c_str());
    const std::string text = srv.metrics_text();
    const std::string gauge = "vispco_shadow_agreement_lower_bound{plan=\"" + canonical + "\",z=\"1.96\"} ";
    const auto at = text.find(gauge);
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_NEAR(std::stod(text.substr(at + gauge.size())), wilson_ref(agree, n, 1.96), 1e-9);
    // Cost: spent + saved = the unpruned FLOPs; shadow runs counted apart.
    const double spent = srv.metrics().value("vispco_prefill_flops_total", {{"plan", canonical}});
    const double saved = srv.metrics().value("vispco_prefill_flops_saved_total", {{"plan", canonical}});
    const double shadow = srv.metrics().value("vispco_shadow_prefill_flops_total", {{"plan", canonical}});
    EXPECT_GT(saved, 0);
    EXPECT_NEAR(spent + saved, shadow, 1e-6 * shadow);  // the shadow runs are the same prompts unpruned
    EXPECT_NEAR(srv.metrics().value("vispco_prefill_cost_total", {{"plan", canonical}}), spent / 1e15 * 2.5,
                1e-9 * spent / 1e15);
    EXPECT_NEAR(srv.metrics().value("vispco_prefill_cost_saved_total", {{"plan", canonical}}),
                saved / 1e15 * 2.5, 1e-9 * saved / 1e15);
    // A sampled request is not shadowed (exact agreement of two samples would measure the sampler).
    json sampled = sample_body(test_slice().samples[0]);
    sampled["temperature"] = 0.7;
    int status = 0;
    EXPECT_EQ(srv.post(sampled, &status)["vispco"]["shadowed"], false);
  }
}

// The guard (ε = 0.25, at least 10 samples): random:keep=8 (the bundled model answers 0.35 of the test split
// at K = 32 against 0.87 unpruned; at K = 8 less) is taken out of service at the first request after its
// agreement's Wilson upper bound falls under 0.75 with ≥ 10 samples, which 4 agreements of 10 or fewer do at
// the 10th sample (4/10: 0.687; 5/10: 0.763); divprune:keep=288 over the same traffic is never replaced.
struct GuardRun {
  size_t on_plan = 0, after = 0;
  std::vector<std::pair<uint64_t, uint64_t>> counts;  // (agreements, samples) before each request
  std::vector<std::string> log;
  double fallbacks = 0, trips = 0;
};

GuardRun guard_run(const std::string& plan, size_t n_requests) {
  serve::SchedulerOptions so;
  so.max_batch = 1;
  so.default_plan = plan;
  serve::PolicyOptions p;
  p.shadow.rate = 1;
  p.guard.epsilon = 0.25;
  p.guard.min_samples = 10;
  TargetServer srv(so, p);
  const std::string canonical = srv.scheduler().resolve_plan("");
  GuardRun g;
  for (size_t i = 0; i < n_requests; ++i) {
    srv.scheduler().wait_idle(true);  // every shadow recorded before the next request chooses its plan
    g.counts.emplace_back(srv.metrics().value("vispco_shadow_agreements_total", {{"plan", canonical}}),
                          srv.metrics().value("vispco_shadow_samples_total", {{"plan", canonical}}));
    int status = 0;
    const json r = srv.post(sample_body(test_slice().samples[i]), &status);
    EXPECT_EQ(status, 200) << r.dump();
    if (r["vispco"]["plan"] == canonical) {
      EXPECT_EQ(g.after, 0u) << "the plan ran again after its trip";
      ++g.on_plan;
    } else {
      EXPECT_EQ(r["vispco"]["plan"], "none");
      EXPECT_EQ(r["vispco"]["guard"]["fallback_from"], canonical);
      ++g.after;
    }
  }
  g.log = srv.log();
  g.fallbacks = srv.metrics().value("vispco_guard_fallbacks_total", {{"from", canonical}, {"to", "none"}});
  g.trips = srv.metrics().value("vispco_guard_trips_total", {{"plan", canonical}});
  return g;
}

// The first request whose preceding counts trip the rule (n ≥ 10, Wilson upper < 0.75), computed with the
// test's own formula; n when none does.
size_t first_trip(const GuardRun& g) {
  for (size_t i = 0; i < g.counts.size(); ++i) {
    const auto [k, m] = g.counts[i];
    const double kk = static_cast<double>(k), mm = static_cast<double>(m);
    if (m >= 10 && 1 - wilson_ref(mm - kk, mm, 1.96) < 0.75) return i;
  }
  return g.counts.size();
}

TEST(Guard, ABadDefaultPlanIsReplacedWithinTheStatedSamplesAndAGoodOneIsNot) {
  const size_t n = 24;
  const GuardRun bad = guard_run("random:keep=8", n);
  const auto [k10, m10] = bad.counts.at(10);
  std::printf("guard: random:keep=8 agreed %lu of the first %lu; ran %zu requests, then %zu fell back\n",
              (unsigned long)k10, (unsigned long)m10, bad.on_plan, bad.after);
  EXPECT_EQ(bad.on_plan, first_trip(bad));
  EXPECT_EQ(bad.on_plan, 10u);  // the stated number: ≤ 4 agreements of 10 trip at the 10th sample
  EXPECT_EQ(bad.after, n - 10);
  EXPECT_EQ(bad.fallbacks, static_cast<double>(n - 10));
  EXPECT_EQ(bad.trips, 1);
  ASSERT_EQ(bad.log.size(), 1u);  // logged once
  EXPECT_NE(bad.log[0].find("plan random:layer=0,keep=8 taken out of service"), std::string::npos)
      << bad.log[0];

  const GuardRun good = guard_run("divprune:keep=288", n);
  const auto [k, m] = good.counts.back();
  std::printf("guard: divprune:keep=288 agreed %lu of %lu\n", (unsigned long)k, (unsigned long)m);
  EXPECT_EQ(first_trip(good), n);
  EXPECT_EQ(good.on_plan, n);
  EXPECT_EQ(good.trips, 0);
  EXPECT_TRUE(good.log.empty());
}

}  // namespace
}  // namespace vispco
