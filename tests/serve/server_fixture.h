// A `vispco serve` stack (scheduler + HTTP server) on the tiny random model, on an ephemeral loopback port,
// and helpers to build OpenAI requests and read server-sent events.
#pragma once
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <thread>
#include <vector>

#include "io/image.h"
#include "model/tiny_model.h"
#include "serve/data_url.h"
#include "serve/server.h"

namespace vispco::testing {

/// PNG bytes of a deterministic random RGB image.
inline std::string test_png(int size, uint64_t seed) {
  cv::Mat img(size, size, CV_8UC3);
  cv::theRNG().state = seed;
  cv::randu(img, cv::Scalar::all(0), cv::Scalar::all(255));
  std::vector<uchar> buf;
  cv::imencode(".png", img, buf);
  return std::string(buf.begin(), buf.end());
}

/// "data:image/png;base64,…" of bytes.
inline std::string data_url(const std::string& bytes) {
  return "data:image/png;base64," + serve::encode_base64(bytes);
}

/// A chat-completion body with one image and one question.
inline nlohmann::json chat_body(const std::string& question, const std::string& png, int max_tokens = 6) {
  return {{"model", "tiny"},
          {"max_tokens", max_tokens},
          {"messages",
           {{{"role", "user"},
             {"content",
              {{{"type", "image_url"}, {"image_url", {{"url", data_url(png)}}}},
               {{"type", "text"}, {"text", question}}}}}}}};
}

/// A connected loopback socket to `port` (−1 on failure), with a receive timeout of `timeout_s`.
inline int connect_to(int port, int timeout_s = 20) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/// The JSON payloads of a server-sent-events body ("data: …" lines), "[DONE]" included as a string.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const auto end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end == std::string::npos ? body.size() : end + 2;
  }
  return out;
}

/// The serving stack, started in the constructor and stopped in the destructor.
class ServerFixture {
 public:
  explicit ServerFixture(serve::SchedulerOptions sched = {}, serve::ServerOptions opts = {})
      : ServerFixture(load_tiny(), tiny_model_dir(), sched, opts) {}
  /// The stack on another model (e.g. the test family of model/linear_projector_family.h).
  ServerFixture(VisionLanguageModel model, const std::string& model_dir, serve::SchedulerOptions sched,
                serve::ServerOptions opts)
      : model_(std::move(model)) {
    serve::declare_server_metrics(metrics_);
    scheduler_ = std::make_unique<serve::BatchScheduler>(model_, model_dir, sched, &metrics_);
    opts.port = 0;
    opts.model_name = "tiny";
    server_ = std::make_unique<serve::ChatServer>(model_, *scheduler_, metrics_, opts);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->listen(); });
  }
  ~ServerFixture() {
    server_->stop();
    thread_.join();
    scheduler_->drain_and_stop();
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  VisionLanguageModel& model() { return model_; }
  serve::BatchScheduler& scheduler() { return *scheduler_; }
  serve::Metrics& metrics() { return metrics_; }

 private:
  VisionLanguageModel model_;
  serve::Metrics metrics_;
  std::unique_ptr<serve::BatchScheduler> scheduler_;
  std::unique_ptr<serve::ChatServer> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace vispco::testing
