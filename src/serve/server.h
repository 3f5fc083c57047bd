// `vispco serve`'s HTTP front: OpenAI-compatible POST /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, GET /health and GET /metrics (Prometheus text), on cpp-httplib behind the connection limits
// of serve/http_guard.h. Requests are parsed and their images decoded on the connection threads (at most
// max_preparing at once); generation runs on the BatchScheduler's worker. Every refusal is an OpenAI error
// object with its status (400 bad request, 401 missing or wrong API key, 403 a Host header naming another
// site on a loopback server, 404 unknown path or model, 405 wrong method, 413 body or image too large, 411 /
// 415 a body without a length or compressed, 503 queue full, too many connections or shutting down, 500
// generation failed); no request can take down another. Threat model: docs/serving.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/vlm.h"
#include "serve/chat_request.h"
#include "serve/connection_limits.h"
#include "serve/metrics.h"
#include "serve/plan_policy.h"
#include "serve/scheduler.h"

namespace vispco::serve {

/// HTTP settings (plain value; validate() names the bad field).
struct ServerOptions {
  std::string host = "127.0.0.1";     ///< address to bind
  int port = 8080;                    ///< TCP port; 0 = any free port (bind() returns it)
  std::string model_name;             ///< the id /v1/models lists and requests may name
  ChatLimits limits;                  ///< max_tokens default and cap
  int64_t max_body_bytes = 20 << 20;  ///< larger bodies → 413
  /// Largest image, in the pixels preprocessing allocates: W·H, and max(W, H)² where the model pads to a
  /// square; checked on the image's header before decoding → 413.
  int64_t max_image_pixels = 4096 * 4096;
  int max_preparing = 4;         ///< requests parsed / decoded / preprocessed at once, ≥ 1
  ConnectionLimits connections;  ///< connection cap, header limits, timeouts (serve/http_guard.h)
  /// When non-empty, every route but /health needs "Authorization: Bearer <api_key>" (else 401).
  std::string api_key;
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

/// The HTTP server. Not copyable; one instance per port.
class ChatServer {
 public:
  /// @param model the loaded model (preprocessing and tokenizer used on HTTP threads; both are read-only)
  /// @param scheduler runs the generations @param metrics shared with the scheduler (declare_server_metrics)
  /// @param policy targets, guard and shadow (serve/plan_policy.h); null: requests run their plan or the
  /// default plan, and a target is a 400
  ChatServer(VisionLanguageModel& model, BatchScheduler& scheduler, Metrics& metrics, ServerOptions opts,
             PlanPolicy* policy = nullptr);
  ~ChatServer();
  ChatServer(const ChatServer&) = delete;
  ChatServer& operator=(const ChatServer&) = delete;
  /// Binds the listening socket. @return the port bound. @throws IoError when the address cannot be bound.
  int bind();
  /// Serves until stop() (blocks the calling thread). Call after bind().
  void listen();
  /// Stops accepting connections at once; listen() returns once the running handlers have returned (a stream
  /// in progress is cut).
  void stop();
  /// Graceful stop (SIGTERM): new chat completions answer 503, every one received is answered to its end
  /// (streams included), then stop(). Blocks until then; waits for listen() to have started.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vispco::serve
