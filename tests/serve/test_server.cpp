// `vispco serve` end to end on the tiny model over loopback HTTP: answers equal generate()'s, streaming
// concatenates to the same text, logprobs match, concurrent requests with two plans are batched by plan and
// answered as alone, every bad request gets its status and leaves the server answering, the queue limit
// answers 503, and /metrics counts what was sent.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <regex>
#include <set>

#include "model/generate.h"
#include "model/logprobs.h"
#include "optimize/dynamic_k/k_predictor.h"
#include "prune/auto_keep/k_features.h"
#include "prune/plan_hook.h"
#include "server_fixture.h"

namespace vispco {
namespace {

using nlohmann::json;
using testing::chat_body;
using testing::ServerFixture;
using testing::test_png;

// What `vispco generate` answers for the same PNG and question (decode → preprocess → LLaVA prompt).
GenerationOutput expected(VisionLanguageModel& m, const std::string& png, const std::string& q,
                          int max_tokens, const std::string& plan = "none", bool logits = false) {
  GenerationConfig gc;
  gc.max_new_tokens = max_tokens;
  PlanHook hook(parse_plan(plan, m.shape()), m.shape(), 0, ScorerEnv{testing::tiny_model_dir()});
  VlmRequest req{m.preprocess(io::decode_image_rgb(png)), m.prompt_ids(q)};
  return generate(m, {req}, gc, hook.plan().empty() ? nullptr : &hook, logits);
}

// Sends `request` on a fresh loopback connection and returns everything the server sends back.
std::string raw_http(int port, const std::string& request) {
  const int fd = testing::connect_to(port, 5);
  if (fd < 0) return "";
  std::string out;
  if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.find("\r\n\r\n") != std::string::npos && out.find("}}") != std::string::npos) break;
    }
  }
  close(fd);
  return out;
}

json post(httplib::Client& c, const json& body, int* status = nullptr) {
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!res) return {{"transport_error", static_cast<int>(res.error())}};
  if (status) *status = res->status;
  return json::parse(res->body);
}

TEST(Server, ChatCompletionAnswersWhatGenerateAnswers) {
  ServerFixture f;
  auto c = f.client();
  const auto png = test_png(64, 1);
  for (const std::string plan : {"none", "fastv:layer=1,keep=8"}) {
    json body = chat_body("How many cubes?", png, 6);
    body["vispco"] = {{"plan", plan}};
    int status = 0;
    const json r = post(c, body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const auto want = expected(f.model(), png, "How many cubes?", 6, plan);
    EXPECT_EQ(r["choices"][0]["message"]["content"], want.texts[0]) << plan;
    EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(r["choices"][0]["finish_reason"], want.finish_reasons[0]);
    EXPECT_EQ(r["object"], "chat.completion");
    const auto n_text = static_cast<int64_t>(f.model().prompt_ids("How many cubes?").size()) - 1;
    EXPECT_EQ(r["usage"]["prompt_tokens"], n_text + 16);
    EXPECT_EQ(r["usage"]["completion_tokens"], static_cast<int64_t>(want.tokens[0].size()));
    EXPECT_EQ(r["vispco"]["visual_tokens"], 16);
    EXPECT_EQ(r["vispco"]["kept_visual_tokens"], plan == "none" ? 16 : 8);
    if (plan == "none")
      EXPECT_DOUBLE_EQ(r["vispco"]["prefill_flops_ratio"].get<double>(), 1.0);
    else
      EXPECT_LT(r["vispco"]["prefill_flops_ratio"].get<double>(), 1.0);
    EXPECT_EQ(r["vispco"]["plan"], parse_plan(plan, f.model().shape()).to_string());
  }
}

TEST(Server, StreamedChunksConcatenateToTheSameAnswer) {
  ServerFixture f;
  auto c = f.client();
  const auto png = test_png(64, 2);
  json body = chat_body("What colour is the cube?", png, 8);
  const json plain = post(c, body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = testing::sse_events(res->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, finish;
  bool saw_usage = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const auto j = json::parse(events[i]);
    if (j.contains("usage")) {
      saw_usage = true;
      EXPECT_EQ(j["usage"], plain["usage"]);
      continue;
    }
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    const auto& ch = j["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(text, plain["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, plain["choices"][0]["finish_reason"]);
  EXPECT_TRUE(saw_usage);
}

TEST(Server, TopLogprobsEqualGenerates) {
  ServerFixture f;
  auto c = f.client();
  const auto png = test_png(64, 3);
  json body = chat_body("Is there a red sphere?", png, 4);
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  const json r = post(c, body);
  const auto want = expected(f.model(), png, "Is there a red sphere?", 4, "none", true);
  const auto lp =
      to_openai_json(token_logprobs(want.step_logits, 0, want.tokens[0], 3, f.model().tokenizer()));
  ASSERT_EQ(r["choices"][0]["logprobs"]["content"].size(), lp.size());
  for (size_t i = 0; i < lp.size(); ++i) {
    const auto& got = r["choices"][0]["logprobs"]["content"][i];
    EXPECT_EQ(got["id"], lp[i]["id"]);
    EXPECT_NEAR(got["logprob"].get<double>(), lp[i]["logprob"].get<double>(), 1e-5);
    ASSERT_EQ(got["top_logprobs"].size(), 3u);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_EQ(got["top_logprobs"][k]["token"], lp[i]["top_logprobs"][k]["token"]);
  }
}

TEST(Server, ConcurrentRequestsWithTwoPlansBatchByPlanAndAnswerAsAlone) {
  serve::SchedulerOptions so;
  so.max_batch = 4;
  so.batch_window_ms = 300;  // long enough that concurrent requests meet in one batch
  ServerFixture f(so);
  const std::vector<std::string> plans = {"none", "divprune:keep=4"};
  const int n = 8;
  std::vector<json> replies(n);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i)
    clients.emplace_back([&, i] {
      auto c = f.client();
      json body = chat_body("How many cubes?", test_png(64, 10 + i), 5);
      body["vispco"] = {{"plan", plans[i % 2]}};
      replies[i] = post(c, body);
    });
  for (auto& t : clients) t.join();
  int64_t largest_batch = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(replies[i].contains("choices")) << replies[i].dump();
    const auto want = expected(f.model(), test_png(64, 10 + i), "How many cubes?", 5, plans[i % 2]);
    EXPECT_EQ(replies[i]["choices"][0]["message"]["content"], want.texts[0]) << i;
    EXPECT_EQ(replies[i]["vispco"]["kept_visual_tokens"], i % 2 == 0 ? 16 : 4)
        << i;  // never mixed across plans
    largest_batch = std::max(largest_batch, replies[i]["vispco"]["batch_size"].get<int64_t>());
  }
  EXPECT_GT(largest_batch, 1);
  EXPECT_LE(largest_batch, 4);
  const auto h = f.metrics().histogram("vispco_batch_size");
  EXPECT_LT(h.count, static_cast<uint64_t>(n));  // fewer batches than requests
}

TEST(Server, KeepAutoBatchesByPredictedKAndAnswersAsTheStaticPlanAlone) {
  testing::TempDir tmp;
  const std::string file = tmp / "k.safetensors";
  const std::vector<std::string> questions = {"How many cubes?", "What colour is the sphere?"};
  const int n = 8;
  {  // a predictor whose rungs vary: statistics fitted on these requests, output layer scaled up
    auto m = testing::load_tiny();
    KPredictorMeta meta;
    meta.template_text = "fastv:layer=2";
    meta.ladder = {2, 4, 8, 16};
    meta.n_features = k_feature_width(m.shape());
    meta.features = kKFeatureRecipe;
    KPredictor p(meta, 11);
    std::vector<at::Tensor> px;
    std::vector<std::string> qs;
    for (int i = 0; i < n; ++i) {
      px.push_back(m.preprocess(io::decode_image_rgb(test_png(64, 40 + i))));
      qs.push_back(questions[i % 2]);
    }
    optimize::fit_feature_stats(p, k_features(m, m.encode_images(at::stack(px), true), qs));
    torch::NoGradGuard g;
    p->out->weight.mul_(20.0);
    save_k_predictor(file, p);
  }
  serve::SchedulerOptions so;
  so.max_batch = 4;
  so.batch_window_ms = 300;
  // The predictor file comes from the server's own options (a request may not name a file).
  so.default_plan = "fastv:layer=2,keep=auto:file=" + file;
  ServerFixture f(so);
  std::vector<json> replies(n);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i)
    clients.emplace_back([&, i] {
      auto c = f.client();
      json body = chat_body(questions[i % 2], test_png(64, 40 + i), 5);
      replies[i] = post(c, body);
    });
  for (auto& t : clients) t.join();
  auto predictor = load_k_predictor(file);
  std::set<int64_t> ks;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(replies[i].contains("choices")) << replies[i].dump();
    // The K this request should get, predicted here for it alone.
    auto px = f.model().preprocess(io::decode_image_rgb(test_png(64, 40 + i))).unsqueeze(0);
    const auto feats = k_features(f.model(), f.model().encode_images(px, true), {questions[i % 2]});
    const int64_t k = predictor->meta.ladder.at(predictor->predict(feats).at(0));
    ks.insert(k);
    const std::string static_plan = k == 16 ? "none" : "fastv:layer=2,keep=" + std::to_string(k);
    const auto want = expected(f.model(), test_png(64, 40 + i), questions[i % 2], 5, static_plan);
    EXPECT_EQ(replies[i]["choices"][0]["message"]["content"], want.texts[0]) << i;
    EXPECT_EQ(replies[i]["vispco"]["kept_visual_tokens"], k) << i;
    EXPECT_EQ(replies[i]["vispco"]["plan"], static_plan == "none" ? "none" : static_plan) << i;
  }
  EXPECT_GE(ks.size(), 2u) << "the test needs requests of different K";
  auto c = f.client();
  int status = 0;
  json body = chat_body("How many?", test_png(64, 1), 3);
  body["vispco"] = {{"plan", "fastv:keep=auto:file=" + tmp / "missing.safetensors"}};
  const auto err = post(c, body, &status);
  EXPECT_EQ(status, 400) << err.dump();
  EXPECT_NE(err.dump().find("may not name a file"), std::string::npos)
      << err.dump();  // a request names no file
}

TEST(Server, BadRequestsGetTheirStatusAndTheServerGoesOn) {
  serve::ServerOptions so;
  so.max_body_bytes = 64 << 10;
  so.max_image_pixels = 48 * 48;
  ServerFixture f({}, so);
  auto c = f.client();
  const auto png = test_png(40, 4);
  auto with = [&](const std::function<void(json&)>& edit) {
    json b = chat_body("q", png);
    edit(b);
    return b.dump();
  };
  const std::vector<std::pair<std::string, int>> cases = {
      {"{not json", 400},
      {with([](json& b) { b.erase("messages"); }), 400},
      {with([](json& b) {
         b["messages"][0]["content"][0]["image_url"]["url"] = "data:image/png;base64,@@@@";
       }),
       400},
      {with([](json& b) {
         b["messages"][0]["content"][0]["image_url"]["url"] = testing::data_url("not an image");
       }),
       400},
      {with(
           [](json& b) { b["messages"][0]["content"][0]["image_url"]["url"] = "https://example.com/x.png"; }),
       400},
      {with([](json& b) {
         b["vispco"] = {{"plan", "nosuch:keep=4"}};
       }),
       400},
      {with([](json& b) {
         b["vispco"] = {{"plan", "fastv:layer=1,keep=999"}};
       }),
       400},
      {with([](json& b) { b["n"] = 2; }), 400},
      {with([](json& b) { b["messages"][0]["content"][1]["text"] = "<image> twice"; }), 400},
      {with([](json& b) { b["max_tokens"] = 600; }),
       400},  // under the cap, over the tiny model's 512 positions
      {std::string(200, '[') + std::string(200, ']'), 400},  // nested past the depth limit
      {with([](json& b) { b["model"] = "gpt-4o"; }), 404},
      {chat_body("q", test_png(64, 5)).dump(), 413},             // 64×64 image over 48×48 pixels
      {chat_body(std::string(70 << 10, 'x'), png).dump(), 413},  // body over 64 KiB
  };
  for (const auto& [body, status] : cases) {
    auto res = c.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(res) << body.substr(0, 80);
    EXPECT_EQ(res->status, status) << body.substr(0, 120) << " → " << res->body;
    const auto j = json::parse(res->body, nullptr, false);
    EXPECT_TRUE(!j.is_discarded() && j.contains("error")) << res->body;
    EXPECT_EQ(c.Get("/health")->status, 200);
  }
  auto res = c.Get("/v1/nothing");
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body).contains("error"));
  res = c.Get("/v1/chat/completions");
  EXPECT_EQ(res->status, 405);
  res = c.Post("/health", "", "text/plain");
  EXPECT_EQ(res->status, 405);
  // A body without Content-Length (chunked) is refused: httplib bounds bodies by that header only. Sent in
  // one write on a raw socket, so the reply can be read whole (httplib's client fails its write once the
  // server has answered and closed).
  const std::string reply =
      raw_http(f.port(),
               "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 411") << reply;
  // A path that is not UTF-8 gets its 404 (its echo in the message must not break the JSON).
  res = c.Get("/%FF%FE");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  // And a good request still gets its answer.
  int status = 0;
  post(c, chat_body("q", png), &status);
  EXPECT_EQ(status, 200);
}

TEST(Server, AFullQueueAnswers503NotACrash) {
  serve::SchedulerOptions so;
  so.max_batch = 1;
  so.batch_window_ms = 0;
  so.max_queue = 1;
  ServerFixture f(so);
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 12; ++i)
    clients.emplace_back([&, i] {
      auto c = f.client();
      json body = chat_body("How many cubes?", test_png(64, 30 + i), 48);
      body["ignore_eos"] = true;  // every request decodes 48 tokens, so the queue fills
      auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (res && res->status == 200)
        ++ok;
      else if (res && res->status == 503 && res->get_header_value("Retry-After") == "1")
        ++busy;
      else
        ++other;
    });
  for (auto& t : clients) t.join();
  EXPECT_GE(ok.load(), 1);
  EXPECT_GE(busy.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(f.client().Get("/health")->status, 200);
}

TEST(Server, MetricsParseAsPrometheusTextAndCountTheRequests) {
  ServerFixture f;
  auto c = f.client();
  const auto png = test_png(64, 6);
  for (int i = 0; i < 3; ++i) post(c, chat_body("q", png, 3));
  c.Post("/v1/chat/completions", "{bad", "application/json");
  // httplib's logger (which counts status codes) runs just after a response is sent: wait for the 4th.
  const auto logged = [&](const char* code) {
    return f.metrics().value("vispco_http_requests_total",
                             {{"code", code}, {"path", "/v1/chat/completions"}});
  };
  for (int k = 0; k < 200 && (logged("400") < 1 || logged("200") < 3); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto res = c.Get("/metrics");
  ASSERT_EQ(res->status, 200);
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? [-+0-9.eEInfNa]+$)");
  std::map<std::string, double> values;
  std::istringstream lines(res->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    const auto sp = line.rfind(' ');
    values[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  EXPECT_EQ(values["vispco_http_requests_total{code=\"200\",path=\"/v1/chat/completions\"}"], 3);
  EXPECT_EQ(values["vispco_http_requests_total{code=\"400\",path=\"/v1/chat/completions\"}"], 1);
  EXPECT_EQ(values["vispco_request_latency_seconds_count"], 3);
  EXPECT_EQ(values["vispco_visual_tokens_total"], 3 * 16);
  EXPECT_EQ(values["vispco_kept_visual_tokens_total"], 3 * 16);
  EXPECT_EQ(values["vispco_ttft_seconds_count"], 3);
  EXPECT_GT(values["vispco_resident_memory_bytes"], 0);
  EXPECT_EQ(values["vispco_ttft_seconds_bucket{le=\"+Inf\"}"], 3);
}

TEST(Server, IgnoreEosRunsToMaxTokensWithFinishReasonLength) {
  ServerFixture f;
  auto c = f.client();
  json body = chat_body("How many cubes?", test_png(64, 7), 9);
  body["ignore_eos"] = true;
  const json r = post(c, body);
  EXPECT_EQ(r["usage"]["completion_tokens"], 9);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
}

TEST(Server, ModelsAndHealth) {
  ServerFixture f;
  auto c = f.client();
  const auto m = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(json::parse(c.Get("/health")->body)["status"], "ok");
}

}  // namespace
}  // namespace vispco
