// Connection limits under cpp-httplib (see http_guard.h): a thread per connection up to a cap, and a socket
// stream that counts and times what the library reads from it.
#include "serve/http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "core/errors.h"

namespace vispco::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_refuse = false;  // set by the queue around a connection it cannot serve
thread_local int t_socket = -1;      // the connection a handler thread serves
thread_local bool t_close = false;   // close the connection after the current response

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

// Waits until `sock` has `events` or `deadline` passes. @return true when ready.
bool wait_for(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, ms_until(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  const int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &n)
                     : ::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &n);
  ip.clear();
  port = 0;
  if (r != 0) return;
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

// The whole answer to a connection over the cap: written without blocking, then the socket is closed.
void refuse_connection(int sock) {
  static const std::string body =
      R"({"error":{"message":"the server has too many open connections; retry later","type":"server_error",)"
      R"("param":null,"code":null}})";
  static const std::string reply =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  [[maybe_unused]] const auto n = ::send(sock, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

}  // namespace

void ConnectionLimits::validate() const {
  const auto need = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument(what);
  };
  need(max_connections >= 1, "max_connections must be ≥ 1, got " + std::to_string(max_connections));
  need(max_header_bytes >= 1024, "max_header_bytes must be ≥ 1024, got " + std::to_string(max_header_bytes));
  need(max_header_lines >= 2, "max_header_lines must be ≥ 2, got " + std::to_string(max_header_lines));
  need(header_timeout_s > 0, "header_timeout_s must be > 0, got " + std::to_string(header_timeout_s));
  need(request_timeout_s > 0, "request_timeout_s must be > 0, got " + std::to_string(request_timeout_s));
  need(idle_timeout_s > 0, "idle_timeout_s must be > 0, got " + std::to_string(idle_timeout_s));
  need(write_timeout_s > 0, "write_timeout_s must be > 0, got " + std::to_string(write_timeout_s));
  need(max_requests_per_connection >= 1,
       "max_requests_per_connection must be ≥ 1, got " + std::to_string(max_requests_per_connection));
}

// A byte stream over one connection's socket that fails (returns −1) a read beyond the request's header or
// body allowance or past its deadline, as httplib::detail::SocketStream would fail on a dead peer.
class GuardedHttpServer::Stream : public httplib::Stream {
 public:
  Stream(int sock, const ConnectionLimits& lim, int64_t body_limit)
      : sock_(sock), lim_(lim), body_limit_(body_limit) {}

  // A new request on the connection: header phase, fresh deadlines and counts.
  void begin_request() {
    in_headers_ = true;
    header_bytes_ = body_bytes_ = 0;
    header_lines_ = 0;
    header_deadline_ = after(lim_.header_timeout_s);
    request_deadline_ = after(lim_.request_timeout_s);
    violated_ = false;
  }
  // httplib has read the request line and headers.
  void end_headers() { in_headers_ = false; }
  bool violated() const { return violated_; }
  bool buffered() const { return pos_ < len_; }

  bool is_readable() const override { return buffered() || wait_for(sock_, POLLIN, deadline()); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, after(lim_.write_timeout_s)); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (!buffered()) {
      if (!wait_for(sock_, POLLIN, deadline())) return fail();
      const ssize_t n = ::recv(sock_, buf_, sizeof(buf_), 0);
      if (n <= 0) return -1;  // closed or reset
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, len_ - pos_);
    if (in_headers_) {
      const int64_t room = lim_.max_header_bytes - header_bytes_;
      if (room <= 0) return fail();
      n = std::min<size_t>(n, static_cast<size_t>(room));
      header_lines_ += static_cast<int>(std::count(buf_ + pos_, buf_ + pos_ + n, '\n'));
      if (header_lines_ > lim_.max_header_lines) return fail();
      header_bytes_ += static_cast<int64_t>(n);
    } else {
      // Chunked framing and trailers may add a little to the body's own bytes.
      const int64_t room = body_limit_ + 65536 - body_bytes_;
      if (room <= 0) return fail();
      n = std::min<size_t>(n, static_cast<size_t>(room));
      body_bytes_ += static_cast<int64_t>(n);
    }
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (!wait_for(sock_, POLLOUT, after(lim_.write_timeout_s))) return -1;
      const ssize_t n = ::send(sock_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return -1;
      }
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point deadline() const {
    return in_headers_ ? std::min(header_deadline_, request_deadline_) : request_deadline_;
  }
  ssize_t fail() {
    violated_ = true;
    return -1;
  }

  int sock_;
  const ConnectionLimits& lim_;
  int64_t body_limit_;
  char buf_[8192];
  size_t pos_ = 0, len_ = 0;
  bool in_headers_ = true, violated_ = false;
  int64_t header_bytes_ = 0, body_bytes_ = 0;
  int header_lines_ = 0;
  Clock::time_point header_deadline_, request_deadline_;
};

// httplib's task queue for accepted connections: a thread each while fewer than the cap are open; over the
// cap the connection is answered 503 on the accepting thread (without blocking) and closed.
class GuardedHttpServer::Queue : public httplib::TaskQueue {
 public:
  explicit Queue(GuardedHttpServer& s) : s_(s) {}
  void enqueue(std::function<void()> fn) override {
    if (s_.open_.load() >= s_.limits_.max_connections || !spawn(fn)) {
      t_refuse = true;
      fn();  // process_and_close_socket sees t_refuse
      t_refuse = false;
    }
  }
  void shutdown() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return live_ == 0; });
  }

 private:
  bool spawn(const std::function<void()>& fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++live_;
    }
    ++s_.open_;
    try {
      std::thread([this, fn] {
        try {
          fn();
        } catch (...) {  // httplib's handlers catch their own; nothing may end the process
        }
        --s_.open_;
        std::lock_guard<std::mutex> lock(mu_);
        --live_;
        cv_.notify_all();  // under the lock: shutdown() may delete the queue once it sees live_ == 0
      }).detach();
      return true;
    } catch (const std::system_error&) {  // no thread to be had: refuse like the cap
      --s_.open_;
      std::lock_guard<std::mutex> lock(mu_);
      --live_;
      return false;
    }
  }
  GuardedHttpServer& s_;
  std::mutex mu_;
  std::condition_variable cv_;
  int live_ = 0;
};

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  limits_.validate();
  new_task_queue = [this] { return new Queue(*this); };
}

GuardedHttpServer::~GuardedHttpServer() = default;

void GuardedHttpServer::set_body_limit(int64_t bytes) {
  if (bytes < 0) throw InvalidArgument("body limit must be ≥ 0, got " + std::to_string(bytes));
  body_limit_ = bytes;
  set_payload_max_length(static_cast<size_t>(bytes));
}

void GuardedHttpServer::set_listen_backlog(int backlog) {
  // Linux lets a listening socket call listen() again to change its backlog (capped by net.core.somaxconn).
  if (::listen(svr_sock_, backlog) != 0)
    throw IoError("serve: cannot set the listen backlog to " + std::to_string(backlog) + ": " +
                  std::strerror(errno));
}

void GuardedHttpServer::stop_listening() {
  const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);  // listen_internal() loops while it is valid
  if (sock == INVALID_SOCKET) return;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

bool GuardedHttpServer::client_gone() {
  if (t_socket < 0) return false;
  char c = 0;
  const ssize_t n = ::recv(t_socket, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // more bytes from it (a pipelined request): still there
  if (n == 0) return true;  // orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void GuardedHttpServer::close_after_response() { t_close = true; }

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  if (t_refuse) {
    ++refused_;
    refuse_connection(sock);
    return false;
  }
  Stream strm(sock, limits_, body_limit_.load());
  t_socket = sock;
  bool ok = true;
  for (int i = 0; i < limits_.max_requests_per_connection; ++i) {
    // The first request's header deadline runs from the accept; later ones' from their first byte.
    if (i > 0 && !strm.buffered() && !wait_for(sock, POLLIN, after(limits_.idle_timeout_s))) break;  // idle
    strm.begin_request();
    t_close = false;
    bool connection_closed = false;
    const bool last = i + 1 == limits_.max_requests_per_connection;
    ok = process_request(strm, last, connection_closed, [&](httplib::Request&) { strm.end_headers(); });
    if (strm.violated()) ++violations_;
    if (!ok || connection_closed || t_close || strm.violated() || !is_running()) break;
  }
  t_socket = -1;
  t_close = false;
  // Lingering close: closing with unread bytes makes the kernel send a reset, which can destroy the reply
  // before the client reads it. Stop writing, discard what the client still sends (bounded), then close.
  ::shutdown(sock, SHUT_WR);
  const auto linger_end = after(0.2);
  char discard[8192];
  for (int64_t drained = 0; drained < (256 << 10) && wait_for(sock, POLLIN, linger_end);) {
    const ssize_t n = ::recv(sock, discard, sizeof(discard), MSG_DONTWAIT);
    if (n <= 0) break;
    drained += n;
  }
  ::close(sock);
  return ok;
}

}  // namespace vispco::serve
