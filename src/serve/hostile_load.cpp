// The hostile-load benchmark (see hostile_load.h): one-request attacks from a pool of threads at a fixed
// rate, held connections (slow headers, idle sockets) from one driver thread, normal clients through
// run_load_test, a /health prober and a peak-RSS monitor, all against a loopback server for a bounded time.
// Malformed requests are written as bytes on POSIX sockets; well-formed ones go through cpp-httplib's client.
#include "serve/hostile_load.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "serve/data_url.h"

namespace vispco::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
Clock::time_point after(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}
int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

const std::vector<AttackKindInfo> kKinds = {
    {AttackKind::kPutChunked, "put-chunked", 1, false, "PUT with a chunked body of --body-mb MiB"},
    {AttackKind::kPatchChunked, "patch-chunked", 1, false, "PATCH with a chunked body of --body-mb MiB"},
    {AttackKind::kPostLengthAndChunked, "post-length-and-chunked", 1, false,
     "POST with Content-Length: 16 and a chunked body of --body-mb MiB"},
    {AttackKind::kPutGzip, "put-gzip", 1, false, "PUT with a gzip body inflating to --gzip-mb MiB of zeros"},
    {AttackKind::kThinImage, "thin-image", 2, false,
     "PNG of --huge-side x (cap / huge side) pixels: at the pixel cap"},
    {AttackKind::kOverCapImage, "over-cap-image", 2, false, "square PNG just under 4x the pixel cap"},
    {AttackKind::kPlanJsonPath, "plan-json-path", 3, false, "plan \"/etc/passwd.json\""},
    {AttackKind::kGateFile, "gate-file", 3, false, "plan \"gate:keep=64,file=/etc/hostname\""},
    {AttackKind::kAutoFileDevZero, "auto-file-dev-zero", 3, false,
     "plan \"divprune:keep=auto:file=/dev/zero\""},
    {AttackKind::kPlanFifo, "plan-fifo", 3, false, "plan \"gate:keep=64,file=FIFO\" (a FIFO nobody writes)"},
    {AttackKind::kPlanSpelling, "plan-spelling", 4, false, "a new spelling of divprune keep=64 each time"},
    {AttackKind::kTinyTemperature, "tiny-temperature", 5, false, "sampled request with temperature 1e-300"},
    {AttackKind::kSlowHeader, "slow-header", 6, true, "--slow-connections sockets sending a header 1 byte/s"},
    {AttackKind::kLongHeaderLine, "long-header-line", 6, false,
     "a header line of --long-line-mb MiB, no newline"},
    {AttackKind::kManyHeaderLines, "many-header-lines", 6, false, "--header-lines header lines"},
    {AttackKind::kIdleConnection, "idle-connection", 6, true, "--idle-connections sockets that send nothing"},
    {AttackKind::kDisconnect, "disconnect", 9, false,
     "non-streamed request, socket closed right after sending"},
};

// Bytes a client may see in a report: printable ASCII kept, anything else as \xNN (a file's bytes echoed back
// must not break the JSON).
std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// ---- Sockets ----

// A connected TCP socket (closed when destroyed); fd() < 0 when the connection failed.
class Socket {
 public:
  /// @param wait false: connect without waiting for the handshake (the held connections, opened in bursts
  /// that can fill the server's accept backlog; one blocked connect would stall every slow header's next
  /// byte)
  Socket(const std::string& host, int port, bool wait = true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return;
    for (auto* a = res; a && fd_ < 0; a = a->ai_next) {
      fd_ =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | (wait ? 0 : SOCK_NONBLOCK), a->ai_protocol);
      if (fd_ < 0) continue;
      if (::connect(fd_, a->ai_addr, a->ai_addrlen) != 0 && (wait || errno != EINPROGRESS)) {
        ::close(fd_);
        fd_ = -1;
      }
    }
    ::freeaddrinfo(res);
  }
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

enum class SendEnd { kSent, kPeerSpoke, kFailed, kTimeout };

// Writes all of `data` unless the server closes the connection, starts answering, or `deadline` passes.
SendEnd send_all(int fd, std::string_view data, Clock::time_point deadline, int64_t* n_sent) {
  size_t off = 0;
  while (off < data.size()) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    const int r = ::poll(&p, 1, ms_until(deadline));
    if (r == 0) return SendEnd::kTimeout;
    if (r < 0) {
      if (errno == EINTR) continue;
      return SendEnd::kFailed;
    }
    if (p.revents & POLLIN) return SendEnd::kPeerSpoke;
    if (p.revents & (POLLERR | POLLHUP)) return SendEnd::kFailed;
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return SendEnd::kFailed;
    }
    off += static_cast<size_t>(n);
    *n_sent += n;
  }
  return SendEnd::kSent;
}

// What the server sent back on a raw connection.
struct RawAnswer {
  std::string label;  // status, "closed" or "timeout"
  std::string body;   // the first bytes of the body
};

// Reads an answer until its head and the start of its body are in, the server closes, or `deadline`.
RawAnswer read_answer(int fd, Clock::time_point deadline) {
  std::string buf;
  bool eof = false;
  for (;;) {
    const auto head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos && buf.size() - head_end - 4 >= 240) break;
    if (head_end != std::string::npos) {
      // A short body: stop once Content-Length bytes are in.
      std::string lower = buf.substr(0, head_end);
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      const auto p = lower.find("content-length:");
      if (p != std::string::npos &&
          buf.size() - head_end - 4 >= std::strtoull(lower.c_str() + p + 15, nullptr, 10))
        break;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_until(deadline));
    if (r == 0) break;
    if (r < 0 && errno == EINTR) continue;
    char tmp[4096];
    const ssize_t n = r < 0 ? -1 : ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      eof = true;
      break;
    }
    buf.append(tmp, static_cast<size_t>(n));
    if (buf.size() > (1 << 16)) break;
  }
  RawAnswer a;
  const int status = parse_status_line(buf);
  if (status >= 0) {
    a.label = std::to_string(status);
    const auto head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos) a.body = buf.substr(head_end + 4);
  } else {
    a.label = eof ? "closed" : "timeout";
  }
  return a;
}

// ---- The attacks ----

struct Outcome {
  std::string label;
  int64_t bytes = 0;
  double open_s = 0;
  int64_t tokens = 0;
  std::string body;
};
Outcome labelled(std::string label) {
  Outcome o;
  o.label = std::move(label);
  return o;
}

// Everything the attacks share, built once before the run.
struct Context {
  explicit Context(const HostileLoadOptions& opts) : o(opts) {}
  const HostileLoadOptions& o;
  std::string host_header;               // "127.0.0.1:PORT"
  std::string gzip_body;                 // the gzip bomb
  std::string thin_body, over_cap_body;  // chat bodies with the two images
  std::string many_headers;              // the many-header-lines request
  std::string fifo_path, fifo_dir;       // the FIFO plan-fifo names
  std::string chunk;                     // one 64 KiB chunk frame of junk
};

// Sends `head` then `body_bytes` of 64 KiB chunks (chunked framing), stopping when the server answers or
// closes; then reads the answer.
Outcome chunked_attack(const Context& c, const std::string& head) {
  Outcome out;
  const auto t0 = Clock::now();
  const auto deadline = after(c.o.attack_timeout_s);
  Socket s(c.o.normal.host, c.o.normal.port);
  if (s.fd() < 0) return labelled("connect-failed");
  SendEnd e = send_all(s.fd(), head, deadline, &out.bytes);
  const int64_t total = c.o.body_mb << 20;
  int64_t body = 0;
  while (e == SendEnd::kSent && body < total) {
    e = send_all(s.fd(), c.chunk, deadline, &out.bytes);
    body += static_cast<int64_t>(c.chunk.size());
  }
  if (e == SendEnd::kSent) e = send_all(s.fd(), "0\r\n\r\n", deadline, &out.bytes);
  const auto a = read_answer(s.fd(), e == SendEnd::kFailed ? after(0.5) : deadline);
  out.label = a.label;
  out.body = a.body;
  out.open_s = seconds_since(t0);
  return out;
}

// Sends `request` whole, then reads the answer.
Outcome raw_attack(const Context& c, std::string_view request) {
  Outcome out;
  const auto t0 = Clock::now();
  const auto deadline = after(c.o.attack_timeout_s);
  Socket s(c.o.normal.host, c.o.normal.port);
  if (s.fd() < 0) return labelled("connect-failed");
  const SendEnd e = send_all(s.fd(), request, deadline, &out.bytes);
  const auto a = read_answer(s.fd(), e == SendEnd::kFailed ? after(0.5) : deadline);
  out.label = a.label;
  out.body = a.body;
  out.open_s = seconds_since(t0);
  return out;
}

// A header line without a newline, long_line_mb MiB, then the answer.
Outcome long_line_attack(const Context& c) {
  Outcome out;
  const auto t0 = Clock::now();
  const auto deadline = after(c.o.attack_timeout_s);
  Socket s(c.o.normal.host, c.o.normal.port);
  if (s.fd() < 0) return labelled("connect-failed");
  const std::string head = "GET /health HTTP/1.1\r\nHost: " + c.host_header + "\r\nX-Long: ";
  SendEnd e = send_all(s.fd(), head, deadline, &out.bytes);
  static const std::string junk(1 << 16, 'a');
  for (int64_t n = 0; e == SendEnd::kSent && n < (c.o.long_line_mb << 20);
       n += static_cast<int64_t>(junk.size()))
    e = send_all(s.fd(), junk, deadline, &out.bytes);
  const auto a = read_answer(s.fd(), e == SendEnd::kFailed ? after(0.5) : deadline);
  out.label = a.label;
  out.body = a.body;
  out.open_s = seconds_since(t0);
  return out;
}

// A whole non-streamed request, then the socket closed at once.
Outcome disconnect_attack(const Context& c, int i) {
  Outcome out;
  const auto t0 = Clock::now();
  Socket s(c.o.normal.host, c.o.normal.port);
  if (s.fd() < 0) return labelled("connect-failed");
  const std::string body = attack_chat_body(c.o.normal.image_bytes, c.o.normal.prompt, "",
                                            c.o.attack_max_tokens, -1, 1000 + i, true);
  const std::string req =
      request_head("POST", "/v1/chat/completions", c.host_header,
                   {{"Content-Type", "application/json"}, {"Content-Length", std::to_string(body.size())}}) +
      body;
  const SendEnd e = send_all(s.fd(), req, after(c.o.attack_timeout_s), &out.bytes);
  out.label = e == SendEnd::kSent        ? "left"
              : e == SendEnd::kPeerSpoke ? read_answer(s.fd(), after(0.5)).label
                                         : "closed";
  out.open_s = seconds_since(t0);
  return out;
}

// A well-formed chat completion through cpp-httplib's client.
Outcome chat_attack(const Context& c, const std::string& body) {
  Outcome out;
  httplib::Client cl(c.o.normal.host, c.o.normal.port);
  cl.set_connection_timeout(3, 0);
  const auto to_s = static_cast<time_t>(c.o.attack_timeout_s);
  const auto to_us = static_cast<time_t>((c.o.attack_timeout_s - static_cast<double>(to_s)) * 1e6);
  cl.set_read_timeout(to_s, to_us);
  cl.set_write_timeout(to_s, to_us);
  const auto t0 = Clock::now();
  auto res = cl.Post("/v1/chat/completions", body, "application/json");
  out.open_s = seconds_since(t0);
  out.bytes = static_cast<int64_t>(body.size());
  if (res) {
    out.label = std::to_string(res->status);
    out.body = res->body;
    if (res->status == 200) {
      const auto j = json::parse(res->body, nullptr, false);
      if (!j.is_discarded() && j.contains("usage"))
        out.tokens = j["usage"].value("completion_tokens", int64_t{0});
    }
    return out;
  }
  switch (res.error()) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
      out.label = "connect-failed";
      break;
    case httplib::Error::Read:
      out.label = out.open_s >= c.o.attack_timeout_s - 0.25 ? "timeout" : "closed";
      break;
    case httplib::Error::Write:
      out.label = "closed";
      break;
    default:
      out.label = httplib::to_string(res.error());
  }
  return out;
}

Outcome run_attack(const Context& c, AttackKind k, int i) {
  const auto& o = c.o;
  const std::string image = o.normal.image_bytes;
  const auto plan_request = [&](const std::string& plan) {
    return chat_attack(c, attack_chat_body(image, o.normal.prompt, plan, o.attack_max_tokens, -1, i));
  };
  const auto chunked_head = [&](const char* method, bool with_length) {
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"}};
    if (with_length) h.emplace_back("Content-Length", "16");
    h.emplace_back("Transfer-Encoding", "chunked");
    return request_head(method, "/v1/chat/completions", c.host_header, h);
  };
  switch (k) {
    case AttackKind::kPutChunked:
      return chunked_attack(c, chunked_head("PUT", false));
    case AttackKind::kPatchChunked:
      return chunked_attack(c, chunked_head("PATCH", false));
    case AttackKind::kPostLengthAndChunked:
      return chunked_attack(c, chunked_head("POST", true));
    case AttackKind::kPutGzip:
      return raw_attack(c, request_head("PUT", "/v1/chat/completions", c.host_header,
                                        {{"Content-Type", "application/json"},
                                         {"Content-Encoding", "gzip"},
                                         {"Content-Length", std::to_string(c.gzip_body.size())}}) +
                               c.gzip_body);
    case AttackKind::kThinImage:
      return chat_attack(c, c.thin_body);
    case AttackKind::kOverCapImage:
      return chat_attack(c, c.over_cap_body);
    case AttackKind::kPlanJsonPath:
      return plan_request("/etc/passwd.json");
    case AttackKind::kGateFile:
      return plan_request("gate:keep=64,file=/etc/hostname");
    case AttackKind::kAutoFileDevZero:
      return plan_request("divprune:keep=auto:file=/dev/zero");
    case AttackKind::kPlanFifo:
      return plan_request("gate:keep=64,file=" + c.fifo_path);
    case AttackKind::kPlanSpelling:
      return plan_request(plan_spelling(i));
    case AttackKind::kTinyTemperature:
      return chat_attack(c, attack_chat_body(image, o.normal.prompt, "", o.attack_max_tokens, 1e-300, i));
    case AttackKind::kLongHeaderLine:
      return long_line_attack(c);
    case AttackKind::kManyHeaderLines:
      return raw_attack(c, c.many_headers);
    case AttackKind::kDisconnect:
      return disconnect_attack(c, i);
    case AttackKind::kSlowHeader:
    case AttackKind::kIdleConnection:
      break;  // held_connections() runs these
  }
  return labelled("not-run");
}

// The held kinds: keeps `slow_connections` sockets dripping a header one byte a second and `idle_connections`
// sockets silent, reopening the ones the server ends (at most once a second each), until `stop`.
void held_connections(const Context& c, const std::atomic<bool>& stop, Clock::time_point t_end,
                      std::mutex& mu, std::map<std::string, AttackTally>& tallies) {
  struct Held {
    Socket s;
    AttackKind kind;
    Clock::time_point opened;
    size_t dripped = 0;
  };
  const std::string drip = "POST /v1/chat/completions HTTP/1.1\r\nHost: " + c.host_header +
                           "\r\nContent-Type: application/json\r\nX-Slow: ";
  std::vector<std::pair<AttackKind, int>> targets;
  for (const auto k : c.o.attacks) {
    if (k == AttackKind::kSlowHeader) targets.emplace_back(k, c.o.slow_connections);
    if (k == AttackKind::kIdleConnection) targets.emplace_back(k, c.o.idle_connections);
  }
  if (targets.empty()) return;
  std::vector<Held> held;
  std::map<AttackKind, int> opened;
  const auto finish = [&](Held& h, const std::string& label) {
    std::lock_guard<std::mutex> lock(mu);
    auto& t = tallies[attack_info(h.kind).name];
    t.add(label);
    t.max_open_s = std::max(t.max_open_s, seconds_since(h.opened));
    t.bytes_sent += static_cast<int64_t>(h.dripped);
  };
  auto next_tick = Clock::now();
  while (!stop && Clock::now() < t_end) {
    if (Clock::now() >= next_tick) {
      next_tick = after(1.0);
      for (const auto& [kind, want] : targets) {  // top up
        int have = 0;
        for (const auto& h : held) have += h.kind == kind;
        for (; have < want && opened[kind] < c.o.max_attacks; ++have) {
          ++opened[kind];
          Socket s(c.o.normal.host, c.o.normal.port, /*wait=*/false);
          std::lock_guard<std::mutex> lock(mu);
          auto& t = tallies[attack_info(kind).name];
          ++t.sent;
          if (s.fd() < 0) {
            t.add("connect-failed");
            break;
          }
          held.push_back({std::move(s), kind, Clock::now()});
        }
      }
      for (auto& h : held) {  // one byte of the slow headers
        if (h.kind != AttackKind::kSlowHeader || h.s.fd() < 0) continue;
        const char b = h.dripped < drip.size() ? drip[h.dripped] : 'a';
        if (::send(h.s.fd(), &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
          ++h.dripped;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != ENOTCONN) {  // still connecting: next tick
          finish(h, "closed");
          h.s.close();
        }
      }
    }
    std::vector<pollfd> fds;
    for (const auto& h : held)
      fds.push_back({h.s.fd(), POLLIN, 0});  // a closed one (fd −1) is ignored by poll
    const int r = ::poll(fds.data(), fds.size(), std::min(ms_until(next_tick), ms_until(t_end)));
    for (size_t j = 0; r > 0 && j < fds.size(); ++j) {
      if (fds[j].fd < 0 || !(fds[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& h = held[j];
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      ::getsockopt(h.s.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      const auto a =
          so_error == ECONNREFUSED ? RawAnswer{"connect-failed", ""} : read_answer(h.s.fd(), after(0.2));
      finish(h, a.label == "timeout" ? "closed" : a.label);  // readable with nothing to read: reset
      std::lock_guard<std::mutex> lock(mu);
      auto& t = tallies[attack_info(h.kind).name];
      if (t.sample.empty() && !a.body.empty()) t.sample = printable(a.body, 240);
      h.s.close();
    }
    held.erase(std::remove_if(held.begin(), held.end(), [](const Held& h) { return h.s.fd() < 0; }),
               held.end());
  }
  for (auto& h : held) finish(h, "held");
}

// Opens every FIFO reader blocked on `path` and lets it see end-of-file (a server thread stuck in open()).
void release_fifo_readers(const std::string& path) {
  for (int tries = 0, quiet = 0; tries < 50 && quiet < 3; ++tries) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      ++quiet;  // ENXIO: nobody reading now
    } else {
      quiet = 0;
      ::close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A sample of `name` from the server's /metrics; −1 when /metrics does not answer.
double metric(const std::string& host, int port, const std::string& name) {
  httplib::Client c(host, port);
  c.set_connection_timeout(3, 0);
  c.set_read_timeout(5, 0);
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return -1;
  const std::string key = "\n" + name + " ";
  const auto p = res->body.find(key);
  return p == std::string::npos ? 0 : std::atof(res->body.c_str() + p + key.size());
}

// The largest of VmHWM and VmRSS of `pid` in MiB; 0 when unreadable (the process is gone).
double peak_rss_mb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  double kb = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0 || line.rfind("VmRSS:", 0) == 0)
      kb = std::max(kb, std::atof(line.c_str() + 6));
  return kb / 1024.0;
}

}  // namespace

const std::vector<AttackKindInfo>& attack_kinds() { return kKinds; }

const AttackKindInfo& attack_info(AttackKind kind) { return kKinds.at(static_cast<size_t>(kind)); }

std::vector<AttackKind> parse_attack_list(const std::string& text) {
  std::set<AttackKind> chosen;
  if (text == "none") return {};
  if (text == "all") {
    for (const auto& k : kKinds) chosen.insert(k.kind);
    return {chosen.begin(), chosen.end()};
  }
  std::stringstream ss(text);
  for (std::string word; std::getline(ss, word, ',');) {
    bool found = false;
    for (const auto& k : kKinds) {
      if (word == k.name || word == std::to_string(k.issue_item)) {
        chosen.insert(k.kind);
        found = true;
      }
    }
    if (!found) {
      std::string valid = "all, none, 1, 2, 3, 4, 5, 6, 9";
      for (const auto& k : kKinds) valid += std::string(", ") + k.name;
      throw InvalidArgument("hostile-load: unknown attack '" + word + "' in --attacks (valid: " + valid +
                            ")");
    }
  }
  return {chosen.begin(), chosen.end()};
}

void HostileLoadOptions::validate() const {
  normal.validate();
  const auto need = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument("hostile-load: " + what);
  };
  need(is_loopback_host(normal.host),
       "--host must be a loopback address (127.0.0.0/8, ::1, localhost), got '" + normal.host +
           "': this benchmark attacks only this machine");
  need(attackers >= 1, "--attackers must be ≥ 1, got " + std::to_string(attackers));
  need(attack_seconds > 0 && attack_seconds <= 600,
       "--attack-seconds must be in (0, 600], got " + std::to_string(attack_seconds));
  need(attack_rate > 0, "--attack-rate must be > 0, got " + std::to_string(attack_rate));
  need(max_attacks >= 1, "--max-attacks must be ≥ 1, got " + std::to_string(max_attacks));
  need(attack_timeout_s > 0, "--attack-timeout-s must be > 0, got " + std::to_string(attack_timeout_s));
  need(slow_connections >= 0, "--slow-connections must be ≥ 0, got " + std::to_string(slow_connections));
  need(idle_connections >= 0, "--idle-connections must be ≥ 0, got " + std::to_string(idle_connections));
  need(body_mb >= 1, "--body-mb must be ≥ 1, got " + std::to_string(body_mb));
  need(gzip_mb >= 1, "--gzip-mb must be ≥ 1, got " + std::to_string(gzip_mb));
  need(huge_side >= 2, "--huge-side must be ≥ 2, got " + std::to_string(huge_side));
  need(max_image_pixels >= 4, "--max-image-pixels must be ≥ 4, got " + std::to_string(max_image_pixels));
  need(max_image_pixels / huge_side >= 1, "--huge-side must be ≤ --max-image-pixels");
  need(long_line_mb >= 1, "--long-line-mb must be ≥ 1, got " + std::to_string(long_line_mb));
  need(header_lines >= 1, "--header-lines must be ≥ 1, got " + std::to_string(header_lines));
  need(attack_max_tokens >= 1, "--attack-max-tokens must be ≥ 1, got " + std::to_string(attack_max_tokens));
  need(server_pid >= 0, "--server-pid must be ≥ 0, got " + std::to_string(server_pid));
}

std::string request_head(std::string_view method, std::string_view path, std::string_view host,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string s;
  s.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ").append(host).append("\r\n");
  for (const auto& [k, v] : headers) s.append(k).append(": ").append(v).append("\r\n");
  return s + "\r\n";
}

std::string chunk_frame(std::string_view payload) {
  char len[24];
  std::snprintf(len, sizeof(len), "%zx\r\n", payload.size());
  return std::string(len).append(payload).append("\r\n");
}

int parse_status_line(std::string_view b) {
  const auto eol = b.find("\r\n");
  if (eol == std::string_view::npos || b.substr(0, 7) != "HTTP/1." || eol < 12 || b[8] != ' ') return -1;
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (b[i] < '0' || b[i] > '9') return -1;
    status = status * 10 + (b[i] - '0');
  }
  return eol == 12 || b[12] == ' ' ? status : -1;
}

std::string gzip_zeros(int64_t n) {
  httplib::detail::gzip_compressor gz;
  std::string out;
  static const std::string zeros(1 << 20, '\0');
  const auto sink = [&](const char* d, size_t len) {
    out.append(d, len);
    return true;
  };
  int64_t done = 0;
  do {
    const auto len = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(zeros.size()), n - done));
    done += static_cast<int64_t>(len);
    if (!gz.compress(zeros.data(), len, done >= n, sink))
      throw Error("hostile-load: gzip compression failed");
  } while (done < n);
  return out;
}

std::string solid_png(int w, int h) {
  std::vector<uchar> buf;
  const cv::Mat img(h, w, CV_8UC3, cv::Scalar(40, 90, 200));
  if (!cv::imencode(".png", img, buf, {cv::IMWRITE_PNG_COMPRESSION, 9}))
    throw InvalidArgument("hostile-load: cannot encode a " + std::to_string(w) + "x" + std::to_string(h) +
                          " PNG");
  return {buf.begin(), buf.end()};
}

std::string plan_spelling(int i) {
  const std::string k = std::string(static_cast<size_t>(64 * (i / 3 + 1)), '0') + "64";
  switch (i % 3) {
    case 0:
      return "divprune:keep=" + k;
    case 1:
      return "divprune:layer=0,keep=" + k;
    default:
      return "divprune:keep=" + k + ",layer=0";
  }
}

std::string attack_chat_body(const std::string& image_bytes, const std::string& prompt,
                             const std::string& plan, int max_tokens, double temperature, int64_t seed,
                             bool ignore_eos) {
  json body = {{"max_tokens", max_tokens},
               {"seed", seed},
               {"messages",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "image_url"},
                     {"image_url", {{"url", "data:image/png;base64," + encode_base64(image_bytes)}}}},
                    {{"type", "text"}, {"text", prompt}}}}}}}};
  if (!plan.empty()) body["vispco"] = {{"plan", plan}};
  if (temperature >= 0) body["temperature"] = temperature;
  if (ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

double attack_start_s(int i, double rate) { return static_cast<double>(i) / rate; }

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  unsigned a, b, c, d;
  char tail;
  return std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
         c < 256 && d < 256;
}

double HostileLoadResult::tokens_for_gone_clients() const {
  if (server_generated_tokens < 0) return -1;
  double answered = normal.generated_tokens;
  for (const auto& [name, t] : attacks) answered += static_cast<double>(t.completion_tokens);
  return std::max(0.0, server_generated_tokens - answered);
}

json HostileLoadResult::to_json() const {
  json a = json::object();
  for (const auto& [name, t] : attacks) {
    int item = 0;
    for (const auto& k : kKinds)
      if (name == k.name) item = k.issue_item;
    a[name] = {{"issue_item", item},         {"sent", t.sent},
               {"answers", t.answers},       {"bytes_sent", t.bytes_sent},
               {"max_open_s", t.max_open_s}, {"completion_tokens", t.completion_tokens},
               {"sample", t.sample}};
  }
  return {{"normal", normal.to_json()},
          {"attacks", a},
          {"health",
           {{"ok", health_ok},
            {"failed", health_failed},
            {"p50_ms", health_ms.p50},
            {"p99_ms", health_ms.p99},
            {"max_ms", health_ms.max}}},
          {"server_peak_rss_mb", server_peak_rss_mb},
          {"server_alive", server_alive},
          {"server_generated_tokens", server_generated_tokens},
          {"tokens_for_gone_clients", tokens_for_gone_clients()}};
}

HostileVerdict judge_hostile_load(double baseline_p99_ms, const HostileLoadResult& r, double rss_bound_mb) {
  HostileVerdict v;
  const auto& n = r.normal;
  v.all_answered = n.failed == 0 && n.ok > 0;
  v.p99_ratio = baseline_p99_ms > 0 && n.latency_ms.p99 > 0 ? n.latency_ms.p99 / baseline_p99_ms : 0;
  v.p99_ok = v.p99_ratio > 0 && v.p99_ratio <= 2.0;
  v.rss_checked = rss_bound_mb > 0;
  v.rss_ok = !v.rss_checked || (r.server_peak_rss_mb > 0 && r.server_peak_rss_mb <= rss_bound_mb);
  v.pass = v.all_answered && v.p99_ok && v.rss_ok;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%s: %d of %d normal requests answered; latency P99 %.0f ms = %.2fx the %.0f ms "
                "without attackers (target <= 2x)",
                v.pass ? "PASS" : "FAIL", n.ok, n.ok + n.failed, n.latency_ms.p99, v.p99_ratio,
                baseline_p99_ms);
  v.summary = buf;
  if (v.rss_checked) {
    std::snprintf(buf, sizeof(buf), "; server peak RSS %.0f MB (bound %.0f MB)", r.server_peak_rss_mb,
                  rss_bound_mb);
    v.summary += buf;
  }
  return v;
}

HostileLoadResult run_hostile_load(const HostileLoadOptions& o) {
  o.validate();
  {
    httplib::Client probe(o.normal.host, o.normal.port);
    auto res = probe.Get("/health");
    if (!res || res->status != 200)
      throw IoError("hostile-load: no server answers GET /health at " + o.normal.host + ":" +
                    std::to_string(o.normal.port));
  }
  const auto has = [&](AttackKind k) {
    return std::find(o.attacks.begin(), o.attacks.end(), k) != o.attacks.end();
  };
  Context c(o);
  c.host_header = o.normal.host + ":" + std::to_string(o.normal.port);
  c.chunk = chunk_frame(std::string(1 << 16, 'x'));
  if (has(AttackKind::kPutGzip)) c.gzip_body = gzip_zeros(o.gzip_mb << 20);
  if (has(AttackKind::kThinImage)) {
    const int short_side = static_cast<int>(o.max_image_pixels / o.huge_side);
    c.thin_body =
        attack_chat_body(solid_png(o.huge_side, short_side), o.normal.prompt, "", o.attack_max_tokens, -1, 1);
  }
  if (has(AttackKind::kOverCapImage)) {
    const int side =
        static_cast<int>(std::floor(std::sqrt(4.0 * static_cast<double>(o.max_image_pixels)))) - 1;
    c.over_cap_body =
        attack_chat_body(solid_png(side, side), o.normal.prompt, "", o.attack_max_tokens, -1, 1);
  }
  if (has(AttackKind::kManyHeaderLines)) {
    std::vector<std::pair<std::string, std::string>> h;
    for (int i = 0; i < o.header_lines; ++i) h.emplace_back("X-H" + std::to_string(i), "v");
    c.many_headers = request_head("GET", "/health", c.host_header, h);
  }
  if (has(AttackKind::kPlanFifo)) {
    char dir[] = "/tmp/vispco-hostile-XXXXXX";
    if (!::mkdtemp(dir)) throw IoError("hostile-load: cannot create a temporary folder for the FIFO");
    c.fifo_dir = dir;
    c.fifo_path = c.fifo_dir + "/plan.fifo";
    if (::mkfifo(c.fifo_path.c_str(), 0600) != 0) throw IoError("hostile-load: cannot mkfifo " + c.fifo_path);
  }
  std::vector<AttackKind> one_shot;
  for (const auto k : o.attacks)
    if (!attack_info(k).held) one_shot.push_back(k);

  HostileLoadResult r;
  std::mutex mu;
  for (const auto k : o.attacks) r.attacks[attack_info(k).name];
  const double tokens_before = metric(o.normal.host, o.normal.port, "vispco_generated_tokens_total");
  std::atomic<bool> stop{false};
  std::atomic<double> rss{0};
  std::thread rss_monitor([&] {
    while (!stop && o.server_pid > 0) {
      rss = std::max(rss.load(), peak_rss_mb(o.server_pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<double> health_ms;
  std::thread prober([&] {
    while (!stop) {
      httplib::Client cl(o.normal.host, o.normal.port);
      cl.set_connection_timeout(3, 0);
      cl.set_read_timeout(3, 0);
      const auto t0 = Clock::now();
      auto res = cl.Get("/health");
      const double ms = seconds_since(t0) * 1e3;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (res && res->status == 200) {
          ++r.health_ok;
          health_ms.push_back(ms);
        } else {
          ++r.health_failed;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  // The normal clients start first (their /health probe must not queue behind the held connections).
  LoadTestOptions normal = o.normal;
  normal.time_limit_s = o.attack_seconds;
  std::exception_ptr normal_error;
  std::thread normal_load([&] {
    try {
      r.normal = run_load_test(normal);
    } catch (...) {
      normal_error = std::current_exception();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  const auto t_end = after(o.attack_seconds);
  std::thread held([&] { held_connections(c, stop, t_end, mu, r.attacks); });
  std::atomic<int> next{0};
  std::vector<std::thread> attackers;
  for (int a = 0; a < o.attackers && !one_shot.empty(); ++a)
    attackers.emplace_back([&] {
      for (;;) {
        const int i = next++;
        const double at = attack_start_s(i, o.attack_rate);
        if (i >= o.max_attacks || at >= o.attack_seconds) return;
        while (!stop && seconds_since(t0) < at) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (stop) return;
        const AttackKind k = one_shot[static_cast<size_t>(i) % one_shot.size()];
        const Outcome out = run_attack(c, k, i);
        std::lock_guard<std::mutex> lock(mu);
        auto& t = r.attacks[attack_info(k).name];
        ++t.sent;
        t.add(out.label);
        t.bytes_sent += out.bytes;
        t.max_open_s = std::max(t.max_open_s, out.open_s);
        t.completion_tokens += out.tokens;
        if (t.sample.empty() && !out.body.empty()) t.sample = printable(out.body, 240);
      }
    });
  for (auto& t : attackers) t.join();
  held.join();
  normal_load.join();
  if (!c.fifo_path.empty()) {
    release_fifo_readers(c.fifo_path);
    ::unlink(c.fifo_path.c_str());
    ::rmdir(c.fifo_dir.c_str());
  }
  // Let the work the server still holds (requests whose clients left or timed out) finish: until nothing
  // waits and the generated-token count stays put for two polls a second apart, at most 30 s.
  double tokens_after = metric(o.normal.host, o.normal.port, "vispco_generated_tokens_total");
  for (int still = 0, i = 0; i < 30 && still < 2 && tokens_after >= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double t = metric(o.normal.host, o.normal.port, "vispco_generated_tokens_total");
    const double waiting = metric(o.normal.host, o.normal.port, "vispco_queue_depth");
    still = t == tokens_after && waiting == 0 ? still + 1 : 0;
    tokens_after = t;
  }
  stop = true;
  prober.join();
  rss_monitor.join();
  if (normal_error) std::rethrow_exception(normal_error);
  r.server_generated_tokens = tokens_before >= 0 && tokens_after >= 0 ? tokens_after - tokens_before : -1;
  r.health_ms = percentiles(health_ms);
  {
    httplib::Client cl(o.normal.host, o.normal.port);
    cl.set_connection_timeout(3, 0);
    cl.set_read_timeout(5, 0);
    auto res = cl.Get("/health");
    r.server_alive = res && res->status == 200;
  }
  if (o.server_pid > 0) rss = std::max(rss.load(), peak_rss_mb(o.server_pid));
  r.server_peak_rss_mb = o.server_pid > 0 ? rss.load() : r.normal.server_peak_rss_mb;
  return r;
}

}  // namespace vispco::serve
