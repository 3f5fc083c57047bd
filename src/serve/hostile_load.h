// The hostile-load benchmark (`vispco hostile-load`, issue 45's acceptance): normal clients (run_load_test,
// serve/loadtest.h) side by side with the issue's attack classes — unbounded bodies, thin or oversized
// images, plans naming server-side files, many spellings of one plan, temperature 1e-300, slow and malformed
// connections, clients that leave — at a stated rate for a stated time, on loopback only; reports the normal
// clients' success rate and latency, how the server answered each attack, and the server's peak RSS.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/loadtest.h"

namespace vispco::serve {

/// One kind of hostile client. The numbers are issue 45's items.
enum class AttackKind {
  kPutChunked,            ///< 1: PUT, Transfer-Encoding: chunked, a body of body_mb MiB
  kPatchChunked,          ///< 1: PATCH, the same
  kPostLengthAndChunked,  ///< 1: POST with both Content-Length and Transfer-Encoding: chunked
  kPutGzip,               ///< 1: PUT, Content-Encoding: gzip, gzip_mb MiB of zeros deflated (a gzip bomb)
  kThinImage,             ///< 2: a PNG of huge_side × (max_image_pixels / huge_side): W·H at the pixel cap
  kOverCapImage,          ///< 2: a square PNG just under 4× the pixel cap (what OpenCV still decodes)
  kPlanJsonPath,          ///< 3: "plan": "/etc/passwd.json"
  kGateFile,              ///< 3: "gate:keep=64,file=/etc/hostname"
  kAutoFileDevZero,       ///< 3: "divprune:keep=auto:file=/dev/zero"
  kPlanFifo,              ///< 3: "gate:keep=64,file=<a FIFO nobody writes>"
  kPlanSpelling,          ///< 4: a new spelling of divprune K = 64 each time (leading-zero runs)
  kTinyTemperature,       ///< 5: a sampled request with temperature 1e-300
  kSlowHeader,            ///< 6: half a header, one byte a second (held connections)
  kLongHeaderLine,        ///< 6: a header line without a newline, long_line_mb MiB
  kManyHeaderLines,       ///< 6: header_lines header lines
  kIdleConnection,        ///< 6: connections that send nothing (held, beyond the server's thread pool)
  kDisconnect,            ///< 9: a non-streamed request whose client closes the socket right after sending it
};

/// The registry of attack kinds: one row each, in AttackKind order.
struct AttackKindInfo {
  AttackKind kind;
  const char* name;  ///< its name in --attacks and reports, e.g. "put-chunked"
  int issue_item;    ///< issue 45's item number (1–6, 9)
  bool held;  ///< a connection held open for the run (slow-header, idle) instead of one request per attack
  const char* what;  ///< one line for --help and reports
};
const std::vector<AttackKindInfo>& attack_kinds();
const AttackKindInfo& attack_info(AttackKind kind);

/// Parses --attacks: "all", "none", or a comma-separated list of kind names and issue item numbers ("1,6" or
/// "put-gzip,9"); duplicates collapse, the result is in AttackKind order. @throws InvalidArgument naming the
/// unknown word and listing the valid ones.
std::vector<AttackKind> parse_attack_list(const std::string& text);

/// Hostile-load settings (plain value; validate() names the bad field). The defaults keep a run near 30 s.
struct HostileLoadOptions {
  LoadTestOptions normal;           ///< the normal clients (host and port are the server's; loopback only)
  std::vector<AttackKind> attacks;  ///< what to run beside them; empty = the baseline (normal clients alone)
  int attackers = 16;               ///< threads sending one-request attacks, ≥ 1
  /// attacks and normal clients start together and stop sending after this, s, (0, 600]
  double attack_seconds = 20;
  double attack_rate = 8;        ///< one-request attacks started per second, all kinds round-robin, > 0
  int max_attacks = 1000;        ///< one-request attacks in all, and connections per held kind, ≥ 1
  double attack_timeout_s = 10;  ///< an attack waits this long for the server's answer, s, > 0
  /// slow-header connections held at once, ≥ 0. With the idle ones, 96 held: beyond `vispco serve`'s default
  /// 76-thread pool (max_queue + max_batch + 4), under a 128-connection cap with room for the other clients.
  int slow_connections = 72;
  int idle_connections = 24;  ///< idle connections held at once, ≥ 0
  int64_t body_mb = 64;       ///< body a chunked attack streams, MiB, ≥ 1
  int64_t gzip_mb = 256;      ///< inflated size of the gzip bomb, MiB, ≥ 1
  int huge_side = 65536;      ///< long side of the thin PNG, pixels, ≥ 2
  /// the server's --max-image-pixels (sizes the two image attacks), ≥ 4
  int64_t max_image_pixels = 4096 * 4096;
  int64_t long_line_mb = 16;  ///< length of the header line without a newline, MiB, ≥ 1
  int header_lines = 10000;   ///< header lines of many-header-lines, ≥ 1
  /// max_tokens of the well-formed attacks (the disconnect ones: ignore_eos), ≥ 1
  int attack_max_tokens = 16;
  int server_pid = 0;  ///< the server's pid: peak RSS from /proc/PID/status (VmHWM); 0 = poll /metrics
  /// @throws InvalidArgument naming the field (also for a host that is not a loopback address).
  void validate() const;
};

/// How the server answered one kind of attack.
struct AttackTally {
  int sent = 0;  ///< attacks started (held kinds: connections opened)
  /// by outcome: an HTTP status ("405"); "closed" (closed or reset before any answer); "timeout" (no answer
  /// in attack_timeout_s); "connect-failed"; "held" (a held connection still open at the end); "left" (we
  /// closed first)
  std::map<std::string, int> answers;
  int64_t bytes_sent = 0;         ///< bytes the attackers wrote
  double max_open_s = 0;          ///< longest one of its connections stayed open, s
  int64_t completion_tokens = 0;  ///< completion tokens of its 200 answers
  std::string sample;             ///< the first answer body (≤ 240 bytes): what the server said
  void add(const std::string& outcome) { ++answers[outcome]; }
};

/// What a hostile-load run measured.
struct HostileLoadResult {
  LoadTestResult normal;                       ///< the normal clients
  std::map<std::string, AttackTally> attacks;  ///< by kind name
  int health_ok = 0, health_failed = 0;  ///< GET /health probes every 0.5 s during the run (3 s timeout)
  Percentiles health_ms;                 ///< their latency, answered probes only
  double server_peak_rss_mb = 0;  ///< VmHWM of server_pid, else the /metrics peak (normal.server_peak_rss_mb)
  bool server_alive = false;      ///< /health answered 200 after the run
  /// vispco_generated_tokens_total, end − start (−1: /metrics unreadable)
  double server_generated_tokens = 0;
  /// Tokens generated for nobody: server_generated_tokens − the normal clients' − the attacks' 200 answers'
  /// (the disconnect attack's work the server did not stop).
  double tokens_for_gone_clients() const;
  nlohmann::json to_json() const;
};

/// Runs the normal clients and the attacks side by side. @throws InvalidArgument for bad options; IoError
/// when the server's /health does not answer at the start.
HostileLoadResult run_hostile_load(const HostileLoadOptions& opts);

/// The acceptance check of issue 45 against a baseline run of the same normal load without attackers.
struct HostileVerdict {
  bool all_answered = false;  ///< every normal request answered 200 (and at least one sent)
  double p99_ratio = 0;       ///< normal latency P99 with attackers ÷ without (0 when a P99 is 0)
  bool p99_ok = false;        ///< p99_ratio ≤ 2
  bool rss_checked = false;   ///< a bound was given
  bool rss_ok = false;        ///< server_peak_rss_mb ≤ the bound
  bool pass = false;          ///< all of the above that apply
  std::string summary;        ///< one line
};
/// @param baseline_p99_ms normal latency P99 of the run without attackers @param rss_bound_mb 0 = not checked
HostileVerdict judge_hostile_load(double baseline_p99_ms, const HostileLoadResult& r, double rss_bound_mb);

// ---- Pieces of the attacks (pure; tested in tests/serve/test_hostile_load.cpp) ----

/// "METHOD PATH HTTP/1.1\r\nHost: HOST\r\n" + each "K: V\r\n" + "\r\n".
std::string request_head(std::string_view method, std::string_view path, std::string_view host,
                         const std::vector<std::pair<std::string, std::string>>& headers);
/// One chunk of a chunked body: hex length, CRLF, the bytes, CRLF ("0\r\n\r\n" ends a body: chunk_frame("") +
/// "\r\n").
std::string chunk_frame(std::string_view payload);
/// The status of an HTTP/1.x status line at the start of `bytes`; −1 when there is no complete one.
int parse_status_line(std::string_view bytes);
/// gzip (RFC 1952) of `n` zero bytes, deflated at zlib's default level through cpp-httplib's compressor.
std::string gzip_zeros(int64_t n);
/// A PNG of w × h pixels of one colour (OpenCV); @throws InvalidArgument when it cannot be encoded.
std::string solid_png(int w, int h);
/// The i-th spelling (i ≥ 0) of the plan divprune:layer=0,keep=64: a different text for every i, K written
/// with a run of 64·(⌊i/3⌋ + 1) leading zeros, the stages' options in three orders.
std::string plan_spelling(int i);
/// A chat completion body with one image: non-streamed, `max_tokens`, `seed`, "ignore_eos": true when asked;
/// `plan` as vispco.plan unless empty; `temperature` unless negative.
std::string attack_chat_body(const std::string& image_bytes, const std::string& prompt,
                             const std::string& plan, int max_tokens, double temperature, int64_t seed,
                             bool ignore_eos = false);
/// When the i-th one-request attack (i ≥ 0) starts, seconds after the run's start: i / rate.
double attack_start_s(int i, double rate);
/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace vispco::serve
