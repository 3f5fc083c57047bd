// `vispco serve` as a process: it listens on the port it reports, answers, and on SIGTERM finishes the stream
// in progress (to its "[DONE]"), then exits 0. Bad flags end with one error line.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "server_fixture.h"
#include "test_paths.h"

extern char** environ;

namespace vispco {
namespace {

using nlohmann::json;

TEST(ServeCli, SigtermFinishesTheStreamInProgressAndExitsZero) {
  testing::TempDir tmp;
  const std::string port_file = tmp / "port";
  std::vector<std::string> args = {::vispco::testing::cli_path(),
                                   "serve",
                                   "--model",
                                   testing::tiny_model_dir(),
                                   "--port",
                                   "0",
                                   "--port-file",
                                   port_file,
                                   "--threads",
                                   "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  int port = 0;
  for (int k = 0; k < 600 && port == 0; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto s = testing::read_file(port_file);
    if (!s.empty() && s.back() == '\n') port = std::stoi(s);
  }
  ASSERT_GT(port, 0) << "no port file";
  httplib::Client c("127.0.0.1", port);
  for (int k = 0; k < 100 && !c.Get("/health"); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  json body = testing::chat_body("How many cubes?", testing::test_png(64, 40), 200);
  body["ignore_eos"] = true;
  body["stream"] = true;
  std::string received;
  bool signalled = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    received.append(d, n);
    if (!signalled && received.find("\"content\":\"") != std::string::npos) {  // the stream is under way
      kill(pid, SIGTERM);
      signalled = true;
    }
    return true;
  };
  auto res = c.send(req);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(signalled);
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos) << received.substr(0, 300);
  EXPECT_NE(received.find("\"finish_reason\":\"length\""), std::string::npos);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ServeCli, BadOptionsEndWithOneErrorLine) {
  auto r = testing::run_cli("serve --model " + testing::tiny_model_dir() + " --port 0 --max-batch 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: max_batch must be"), std::string::npos) << r.err;
  r = testing::run_cli("serve --model " + testing::tiny_model_dir() + " --port 0 --plan nosuch:keep=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
  for (const std::string bad : {"-1", "12x", "many"}) {
    r = testing::run_cli("serve --model " + testing::tiny_model_dir() + " --port 0 --max-prefill-tokens " +
                         bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--max-prefill-tokens must be auto or a count"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  r = testing::run_cli("serve --model /no/such/model --port 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace vispco
