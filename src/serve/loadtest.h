// A closed-loop load generator for `vispco serve` (`vispco loadtest`): N concurrent clients send streamed
// chat completions with one image until a fixed number of requests is answered or a time bound passes, on
// loopback; reports requests/s, P50/P99 time to first token and end-to-end latency (measured at the client),
// generated tokens/s and the server's peak resident memory (polled from /metrics).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::serve {

/// Load-test settings (plain value; validate() names the bad field).
struct LoadTestOptions {
  std::string host = "127.0.0.1";  ///< server address
  int port = 8080;                 ///< server port
  std::string image_bytes;         ///< the encoded image every request carries (PNG/JPEG/…)
  std::string prompt;              ///< the question
  std::string plan;                ///< vispco.plan of every request ("" = the server's default)
  int clients = 8;                 ///< concurrent clients, ≥ 1
  int requests = 64;               ///< requests to send, ≥ 1
  int max_tokens = 16;             ///< max_tokens of every request, ≥ 1
  bool ignore_eos = false;         ///< send "ignore_eos": every request decodes max_tokens tokens
  double time_limit_s = 600;       ///< stop sending after this many seconds, > 0
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

/// Nearest-rank percentiles of a sample, in its unit.
struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
/// Percentiles of `v` (nearest rank: the ⌈q·n⌉-th smallest); all 0 for an empty sample.
Percentiles percentiles(std::vector<double> v);

/// What a load test measured.
struct LoadTestResult {
  int ok = 0, failed = 0;       ///< answered 200 / anything else (transport errors, 4xx, 5xx, an error event)
  std::vector<int> statuses;    ///< status of each failed request (0 = transport error; 500 = a stream that
                                ///< began 200 and carried an error event instead of its end)
  double wall_s = 0;            ///< first request sent → last answer received
  double requests_per_s = 0;    ///< ok / wall_s
  double generated_tokens = 0;  ///< completion tokens of ok requests
  double generated_tokens_per_s = 0;  ///< generated_tokens / wall_s
  Percentiles ttft_ms, latency_ms;    ///< client-side, ok requests only
  double mean_batch_size = 0;    ///< mean vispco.batch_size the server reported (rows of a request's prefill)
  double mean_decode_batch = 0;  ///< mean vispco.decode_batch_size (most rows decoded with a request)
  double server_peak_rss_mb = 0;  ///< largest vispco_resident_memory_bytes seen on /metrics
  nlohmann::json to_json() const;
};

/// Runs the test against a live server. @throws InvalidArgument for bad options; IoError when the server's
/// /health does not answer.
LoadTestResult run_load_test(const LoadTestOptions& opts);

}  // namespace vispco::serve
