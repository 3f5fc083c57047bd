// `vispco loadtest`: N concurrent streamed chat completions against a running `vispco serve`; prints
// requests/s, P50/P99 TTFT and latency, tokens/s and the server's peak RSS (src/serve/loadtest.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/errors.h"
#include "serve/loadtest.h"

namespace vispco::cli {

void register_loadtest(CLI::App& app) {
  struct Opts {
    serve::LoadTestOptions lt;
    std::string image;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("loadtest", "Load-test a running `vispco serve` with concurrent image requests");
  cmd->add_option("--host", o->lt.host, "Server address")->capture_default_str();
  cmd->add_option("--port", o->lt.port, "Server port")->capture_default_str();
  cmd->add_option("--image", o->image, "Image every request carries (PNG, JPEG, WebP, BMP)")->required();
  cmd->add_option("--prompt", o->lt.prompt, "Question every request asks")->required();
  cmd->add_option("--plan", o->lt.plan, "vispco.plan of every request (default: the server's)");
  cmd->add_option("--clients", o->lt.clients, "Concurrent clients")->capture_default_str();
  cmd->add_option("--requests", o->lt.requests, "Requests to complete")->capture_default_str();
  cmd->add_option("--max-tokens", o->lt.max_tokens, "max_tokens of each request")->capture_default_str();
  cmd->add_option("--time-limit-s", o->lt.time_limit_s, "Stop sending after this many seconds")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->lt.ignore_eos,
                "Every request decodes --max-tokens tokens (a decode-bound load)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    std::ifstream in(o->image, std::ios::binary);
    if (!in) throw IoError("loadtest: cannot read image '" + o->image + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    o->lt.image_bytes = ss.str();
    const auto r = serve::run_load_test(o->lt);
    if (o->json) {
      auto j = r.to_json();
      j["clients"] = o->lt.clients;
      j["plan"] = o->lt.plan;
      j["max_tokens"] = o->lt.max_tokens;
      j["ignore_eos"] = o->lt.ignore_eos;
      std::cout << j.dump() << "\n";
    } else {
      std::printf(
          "%d ok, %d failed in %.2f s: %.2f req/s, %.1f tok/s | TTFT P50 %.1f P99 %.1f ms | latency P50 "
          "%.1f P99 %.1f ms | mean batch %.2f (decode %.2f) | server peak RSS %.0f MB\n",
          r.ok, r.failed, r.wall_s, r.requests_per_s, r.generated_tokens_per_s, r.ttft_ms.p50, r.ttft_ms.p99,
          r.latency_ms.p50, r.latency_ms.p99, r.mean_batch_size, r.mean_decode_batch, r.server_peak_rss_mb);
    }
    if (r.ok == 0) throw Error("loadtest: no request succeeded");
  });
}

}  // namespace vispco::cli
