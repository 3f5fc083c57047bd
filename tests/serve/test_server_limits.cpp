// `vispco serve` against hostile clients (issue 45), on the tiny model over loopback: bodies that are not
// bounded by a Content-Length are refused before they are read, whatever the method; an image whose padded
// square is over the pixel limit is refused from its header; a full queue refuses before preparing; plans may
// not name files and their spellings share one cache entry; a tiny temperature samples the argmax without
// failing the batch; header bytes, header lines, slow headers and connections are bounded; a non-streamed
// client that leaves stops its generation; the API key and the Host check.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "model/generate.h"
#include "prune/plan_hook.h"
#include "server_fixture.h"

namespace vispco {
namespace {

using nlohmann::json;
using testing::chat_body;
using testing::connect_to;
using testing::ServerFixture;
using testing::test_png;

bool send_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Everything the server sends until it closes the connection or the receive timeout passes.
std::string read_until_close(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Sends a request head (and no body) and returns the status line's code, or 0 when the server closed the
// connection without a reply or sent none within the timeout.
int status_of_head(int port, const std::string& head) {
  const int fd = connect_to(port);
  if (fd < 0 || !send_all(fd, head)) return -1;
  std::string reply;
  char buf[4096];
  ssize_t n;
  while (reply.find("\r\n") == std::string::npos && (n = recv(fd, buf, sizeof buf, 0)) > 0)
    reply.append(buf, static_cast<size_t>(n));
  close(fd);
  std::smatch m;
  if (std::regex_search(reply, m, std::regex("^HTTP/1\\.1 (\\d{3})"))) return std::stoi(m[1]);
  return 0;
}

TEST(ServerLimits, BodiesWithoutALengthOrCompressedAreRefusedBeforeReadingOnEveryMethod) {
  ServerFixture f;
  // Only the head is sent: a server that reads the body first would wait for it (the reply never comes
  // within the 20 s receive timeout, and status_of_head returns 0).
  const std::vector<std::pair<std::string, int>> cases = {
      {"PUT /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
      {"PATCH /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
      {"PUT /anything HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n"
       "Transfer-Encoding: chunked\r\n\r\n",
       411},
      {"PUT /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\nContent-Length: "
       "100000\r\n\r\n",
       415},
      {"PATCH /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n", 413},
      {"PUT /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n", 405},
  };
  for (const auto& [head, status] : cases) EXPECT_EQ(status_of_head(f.port(), head), status) << head;
  EXPECT_EQ(f.client().Get("/health")->status, 200);
}

TEST(ServerLimits, AnImageWhosePaddedSquareIsOverTheLimitIsRefusedFromItsHeader) {
  ServerFixture f;  // default limit 4096² pixels
  // 65536 × 256 = 4096² pixels exactly (the W·H limit passes), padded to a 65536² square: 12 GiB of RGB.
  cv::Mat wide(256, 65536, CV_8UC1, cv::Scalar(0));
  std::vector<uchar> buf;
  cv::imencode(".png", wide, buf);
  wide.release();
  ASSERT_LT(buf.size(), 200000u);  // a small request
  auto c = f.client();
  auto res = c.Post("/v1/chat/completions", chat_body("q", std::string(buf.begin(), buf.end())).dump(),
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_NE(res->body.find("65536x256"), std::string::npos) << res->body;
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(ServerLimits, ARefusingSchedulerAnswers503BeforeTheRequestIsParsed) {
  ServerFixture f;
  // Malformed JSON is a 400 while the scheduler takes requests...
  auto res = f.client().Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  // ...and a 503 once it refuses them (as with a full queue): the admission check comes before any parsing,
  // decoding or preprocessing, so a refusal costs nothing.
  f.scheduler().stop_accepting();
  res = f.client().Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
}

TEST(ServerLimits, PlansFromRequestsMayNotNameFilesAndExistenceDoesNotShow) {
  ServerFixture f;
  const auto dir = std::filesystem::temp_directory_path() / ("vispco-plan-files-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto existing = (dir / "plan.json").string();
  std::ofstream(existing) << R"({"stages": [{"scorer": "fastv", "layer": 2, "keep": 4}]})";
  auto c = f.client();
  std::set<std::string> messages;
  const std::vector<std::string> plans = {existing,
                                          (dir / "missing.json").string(),
                                          "gate:keep=4,file=" + existing,
                                          "gate:keep=4,file=/nonexistent",
                                          "fastv:keep=auto:file=" + existing,
                                          "fastv:keep=auto:file=/dev/zero"};
  for (const auto& plan : plans) {
    json b = chat_body("q", test_png(32, 3), 2);
    b["vispco"] = {{"plan", plan}};
    auto res = c.Post("/v1/chat/completions", b.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << plan << " → " << res->body;
    messages.insert(json::parse(res->body)["error"]["message"].get<std::string>());
  }
  EXPECT_EQ(messages.size(), 1u) << "every file-naming plan gets the same answer";
  EXPECT_NE(messages.begin()->find("may not name a file"), std::string::npos) << *messages.begin();
  std::filesystem::remove_all(dir);
}

TEST(ServerLimits, SpellingsOfOnePlanShareOneCacheEntry) {
  ServerFixture f;
  const size_t before = f.scheduler().cached_plan_count();
  std::set<std::string> canonical;
  for (int zeros = 0; zeros < 50; ++zeros)
    canonical.insert(f.scheduler().resolve_plan("fastv:layer=2,keep=" + std::string(zeros, '0') + "4"));
  EXPECT_EQ(canonical, std::set<std::string>{"fastv:layer=2,keep=4"});
  EXPECT_EQ(f.scheduler().cached_plan_count(), before + 1);
}

TEST(ServerLimits, NoneInAnyCaseIsTheUnprunedPlan) {
  ServerFixture f;
  for (const std::string p : {"none", "NONE", "None", " none "})
    EXPECT_EQ(f.scheduler().resolve_plan(p), "none") << p;
  EXPECT_TRUE(f.scheduler().bound_plan("NONE").unpruned());
}

TEST(ServerLimits, ATinyTemperatureSamplesTheArgmaxAndOtherRequestsAreUntouched) {
  serve::SchedulerOptions so;
  so.batch_window_ms = 200;  // the two requests share one batch
  ServerFixture f(so);
  const auto png = test_png(64, 9);
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  VlmRequest req{f.model().preprocess(io::decode_image_rgb(png)), f.model().prompt_ids("How many?")};
  const auto greedy = generate(f.model(), {req}, gc);
  std::vector<json> replies(2);
  std::vector<int> status(2, 0);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i)
    ts.emplace_back([&, i] {
      json b = chat_body("How many?", png, 5);
      if (i == 0) {
        b["temperature"] = 1e-300;
        b["seed"] = 7;
      }
      auto res = f.client().Post("/v1/chat/completions", b.dump(), "application/json");
      if (res) {
        status[i] = res->status;
        replies[i] = json::parse(res->body);
      }
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(status[i], 200) << replies[i].dump();
    // T → 0 is argmax: the sampled answer equals the greedy one (the tiny model's logits have no ties).
    EXPECT_EQ(replies[i]["usage"]["completion_tokens"].get<size_t>(), greedy.tokens[0].size()) << i;
    EXPECT_EQ(replies[i]["choices"][0]["message"]["content"], greedy.texts[0]) << i;
  }
}

TEST(ServerLimits, LongHeaderLinesAndTooManyHeadersAreCutOff) {
  serve::ServerOptions so;
  so.connections.max_header_bytes = 4096;
  so.connections.max_header_lines = 20;
  ServerFixture f({}, so);
  // A header line with no end: the server stops reading at the limit and closes (httplib alone would buffer
  // it for as long as it comes). 32 MiB are offered, more than loopback socket buffers hold: a server still
  // reading takes them all; one that closed makes the sends fail after a few MiB at most.
  {
    const int fd = connect_to(f.port(), 10);
    ASSERT_GE(fd, 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    send_all(fd, "GET /health HTTP/1.1\r\nX-Long: ");
    const std::string chunk(1 << 16, 'a');
    size_t sent = 0;
    for (int i = 0; i < 512; ++i) {
      const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;  // reset by the server, or its window stayed shut for 5 s
      sent += static_cast<size_t>(n);
    }
    const std::string reply = read_until_close(fd);
    close(fd);
    EXPECT_LT(sent, size_t{32} << 20) << "the server kept reading a header line past its limit";
    EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 400", 0) == 0) << reply.substr(0, 80);
  }
  std::string many = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 40; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  many += "\r\n";
  const int st = status_of_head(f.port(), many);
  EXPECT_TRUE(st == 400 || st == 0) << st;
  EXPECT_EQ(status_of_head(f.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
            200);
}

TEST(ServerLimits, SlowHeadersAreClosedAtTheirDeadlineAndHealthAnswersMeanwhile) {
  serve::ServerOptions so;
  so.connections.header_timeout_s = 1;
  ServerFixture f({}, so);
  // 40 clients each send half a request head and stop (more than httplib's old pool of threads).
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    const int fd = connect_to(f.port(), 15);
    ASSERT_GE(fd, 0);
    send_all(fd, "GET /health HTTP/1.1\r\nHo");
    slow.push_back(fd);
  }
  EXPECT_EQ(f.client().Get("/health")->status, 200);
  for (const int fd : slow) {  // each gets a 400 or nothing, and is closed by the server well before 15 s
    std::string reply;
    char buf[512];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
    EXPECT_FALSE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << "still open after 15 s";
    EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 400", 0) == 0) << reply.substr(0, 40);
    close(fd);
  }
}

TEST(ServerLimits, ConnectionsOverTheCapGet503AndTheServerRecovers) {
  serve::ServerOptions so;
  so.connections.max_connections = 4;
  so.connections.header_timeout_s = 30;
  ServerFixture f({}, so);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(connect_to(f.port()));
  // Each idle connection holds its thread; wait until the server has taken all four.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(status_of_head(f.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 503);
  for (const int fd : idle) close(fd);
  int st = 0;
  for (int i = 0; i < 100 && st != 200; ++i) {  // the closed ones are released as their threads see EOF
    st = status_of_head(f.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (st != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(st, 200);
}

TEST(ServerLimits, ANonStreamedClientThatLeavesStopsItsGeneration) {
  ServerFixture f;
  json b = chat_body("q", test_png(64, 11), 400);
  b["ignore_eos"] = true;  // 400 tokens if nobody stops it
  const std::string body = b.dump();
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd,
                       "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                       "application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  for (int i = 0; i < 2000 && f.scheduler().queue_depth() == 0; ++i) {  // until it is queued or running
    const auto m = f.metrics().render();
    if (m.find("vispco_batch_size_count 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  close(fd);
  f.scheduler().wait_idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto metrics = f.metrics().render();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("vispco_generated_tokens_total ([0-9.e+]+)")))
      << metrics;
  EXPECT_LT(std::stod(m[1]), 400.0) << "the generation ran to its end after the client left";
}

TEST(ServerLimits, ApiKeyAndHostCheck) {
  serve::ServerOptions so;
  so.api_key = "sekrit";
  ServerFixture f({}, so);
  auto c = f.client();
  EXPECT_EQ(c.Get("/health")->status, 200);  // health checks need no key
  auto res = c.Get("/v1/models");
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer");
  c.set_bearer_token_auth("wrong");
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  c.set_bearer_token_auth("sekrit");
  EXPECT_EQ(c.Get("/v1/models")->status, 200);
  int status = 0;
  auto r = c.Post("/v1/chat/completions", chat_body("q", test_png(32, 2), 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // A page on another site reaching the loopback server through DNS rebinding sends its own Host.
  EXPECT_EQ(
      status_of_head(f.port(), "GET /health HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n"),
      403);
  EXPECT_EQ(status_of_head(f.port(), "GET /health HTTP/1.1\r\nHost: localhost:" + std::to_string(f.port()) +
                                         "\r\nConnection: close\r\n\r\n"),
            200);
  (void)status;
}

}  // namespace
}  // namespace vispco
