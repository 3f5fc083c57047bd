// Connection-level limits of `vispco serve` (enforced by serve/http_guard.h under cpp-httplib).
#pragma once
#include <cstdint>

namespace vispco::serve {

/// Connection-level limits (plain value; validate() names the bad field). Defaults: docs/serving.md,
/// "Limits and threat model".
struct ConnectionLimits {
  int max_connections = 128;  ///< open connections served at once; one more gets 503 and is closed, ≥ 1
  int64_t max_header_bytes = 16384;  ///< request line + headers, bytes (httplib: unbounded), ≥ 1024
  int max_header_lines = 100;        ///< request line + header lines (httplib: unbounded), ≥ 2
  double header_timeout_s = 10;      ///< request line + headers must arrive within this, seconds, > 0
  double request_timeout_s = 60;     ///< the whole request (headers + body) within this, seconds, > 0
  double idle_timeout_s = 5;         ///< keep-alive: wait this long for the next request, seconds, > 0
  double write_timeout_s = 10;       ///< a write that cannot proceed for this long ends the connection, > 0
  int max_requests_per_connection = 100;  ///< keep-alive requests on one connection, ≥ 1
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

}  // namespace vispco::serve
