// Limits enforced in front of cpp-httplib 0.11.4 (Debian 12), which bounds neither a request's header bytes
// nor its header count nor the time a client may take to send them, and queues connections beyond its thread
// pool without bound. GuardedHttpServer keeps httplib's HTTP parsing and routing and replaces only the socket
// layer under them: one thread per connection up to a cap (beyond it a canned 503 and close), a byte stream
// that refuses header bytes, header lines and body bytes beyond their limits and reads past the request's
// deadline (httplib then answers 400 or drops the connection), and the connection's socket made visible to
// the handler so a non-streamed handler can see its client leave. No HTTP is parsed here.
#pragma once
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "serve/connection_limits.h"

namespace vispco::serve {

/// cpp-httplib's server with ConnectionLimits enforced on every connection. Use like httplib::Server; call
/// set_body_limit() with the largest body any route accepts (bytes read past headers + that + chunk framing
/// fail the read). Not copyable.
class GuardedHttpServer : public httplib::Server {
 public:
  /// @throws InvalidArgument for bad limits.
  explicit GuardedHttpServer(ConnectionLimits limits);
  ~GuardedHttpServer() override;
  /// Largest body, bytes (≥ 0); also httplib's payload limit.
  void set_body_limit(int64_t bytes);
  /// Re-listens the bound socket with a longer accept backlog (httplib 0.11.4 listens with 5, so a burst of
  /// connections has its SYNs dropped and retried after 1, 3, 7 … s, normal clients' included). Call after
  /// bind. @throws IoError when listen() fails.
  void set_listen_backlog(int backlog);
  /// Closes the listening socket: listen() returns, or returns at once if it has not started yet (httplib's
  /// stop() does nothing before listen() has set its running flag, so a stop right after bind was lost).
  void stop_listening();
  /// Connections open now (served; the refused ones are not counted).
  int open_connections() const { return open_.load(); }
  /// Connections refused with 503 for the cap since start.
  int64_t refused_connections() const { return refused_.load(); }
  /// Requests whose headers broke a limit or deadline (answered 400 or dropped) since start.
  int64_t limit_violations() const { return violations_.load(); }
  const ConnectionLimits& limits() const { return limits_; }

  /// True when the client of the connection the calling thread serves has closed or reset it (a handler
  /// thread only; false elsewhere). Non-blocking.
  static bool client_gone();
  /// Ends the connection the calling thread serves once the current response is written (a refused request's
  /// unread body must not be read as the next request). A handler thread only; no effect elsewhere.
  static void close_after_response();

 private:
  bool process_and_close_socket(socket_t sock) override;
  class Stream;
  class Queue;
  friend class Queue;
  ConnectionLimits limits_;
  std::atomic<int64_t> body_limit_{20 << 20};
  std::atomic<int> open_{0};
  std::atomic<int64_t> refused_{0}, violations_{0};
};

}  // namespace vispco::serve
