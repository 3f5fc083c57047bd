// `vispco hostile-load`: normal clients side by side with issue 45's attack classes against a running
// `vispco serve` on loopback, for a bounded time; prints how the server answered (src/serve/hostile_load.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/errors.h"
#include "serve/hostile_load.h"

namespace vispco::cli {
namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(std::string("hostile-load: cannot read ") + what + " '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string answers_text(const serve::AttackTally& t) {
  std::string s;
  for (const auto& [outcome, n] : t.answers) s += (s.empty() ? "" : ", ") + outcome + " " + std::to_string(n);
  return s.empty() ? "-" : s;
}

}  // namespace

void register_hostile_load(CLI::App& app) {
  struct Opts {
    serve::HostileLoadOptions h;
    std::string image, attacks = "all", baseline;
    double rss_bound_mb = 0;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->h.normal.clients = 4;
  o->h.normal.requests = 1000;
  o->h.normal.max_tokens = 8;
  std::string kinds;
  for (const auto& k : serve::attack_kinds())
    kinds += std::string("\n  ") + k.name + " (" + std::to_string(k.issue_item) + "): " + k.what;
  auto* cmd = app.add_subcommand(
      "hostile-load",
      "Normal clients beside hostile ones (issue 45's attacks) against a running `vispco serve` on "
      "loopback, for a bounded time");
  auto& h = o->h;
  cmd->add_option("--host", h.normal.host, "Server address (loopback only)")->capture_default_str();
  cmd->add_option("--port", h.normal.port, "Server port")->capture_default_str();
  cmd->add_option("--image", o->image, "Image of the normal requests (and the well-formed attacks)")
      ->required();
  cmd->add_option("--prompt", h.normal.prompt, "Question of every request")->required();
  cmd->add_option("--plan", h.normal.plan, "vispco.plan of the normal requests (default: the server's)");
  cmd->add_option("--clients", h.normal.clients, "Concurrent normal clients (streamed requests)")
      ->capture_default_str();
  cmd->add_option("--requests", h.normal.requests, "Most normal requests (they stop after --attack-seconds)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", h.normal.max_tokens, "max_tokens of the normal requests")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", h.normal.ignore_eos, "Normal requests decode --max-tokens tokens");
  cmd->add_option("--attacks", o->attacks,
                  "all | none (the baseline) | comma-separated names or issue items:" + kinds)
      ->capture_default_str();
  cmd->add_option("--attackers", h.attackers, "Threads sending one-request attacks")->capture_default_str();
  cmd->add_option("--attack-seconds", h.attack_seconds, "Attacks and normal clients stop sending after this")
      ->capture_default_str();
  cmd->add_option("--attack-rate", h.attack_rate, "One-request attacks started per second, kinds in turn")
      ->capture_default_str();
  cmd->add_option("--max-attacks", h.max_attacks, "Most one-request attacks, and connections per held kind")
      ->capture_default_str();
  cmd->add_option("--attack-timeout-s", h.attack_timeout_s, "How long an attack waits for its answer")
      ->capture_default_str();
  cmd->add_option("--slow-connections", h.slow_connections, "slow-header connections held at once")
      ->capture_default_str();
  cmd->add_option("--idle-connections", h.idle_connections, "idle connections held at once")
      ->capture_default_str();
  cmd->add_option("--body-mb", h.body_mb, "MiB a chunked-body attack streams")->capture_default_str();
  cmd->add_option("--gzip-mb", h.gzip_mb, "MiB the gzip bomb inflates to")->capture_default_str();
  cmd->add_option("--huge-side", h.huge_side, "Long side of the thin PNG (the server pads to its square)")
      ->capture_default_str();
  cmd->add_option("--max-image-pixels", h.max_image_pixels,
                  "The server's --max-image-pixels (sizes the images)")
      ->capture_default_str();
  cmd->add_option("--long-line-mb", h.long_line_mb, "MiB of the header line without a newline")
      ->capture_default_str();
  cmd->add_option("--header-lines", h.header_lines, "Header lines of many-header-lines")
      ->capture_default_str();
  cmd->add_option("--attack-max-tokens", h.attack_max_tokens,
                  "max_tokens of the well-formed attacks (ignore_eos for the disconnect ones)")
      ->capture_default_str();
  cmd->add_option("--server-pid", h.server_pid, "The server's pid: peak RSS from /proc/PID/status (VmHWM)");
  cmd->add_option("--baseline", o->baseline, "JSON of the same run with --attacks none: prints the verdict");
  cmd->add_option("--rss-bound-mb", o->rss_bound_mb, "Peak-RSS bound for the verdict (0: not checked)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] {
    auto& h = o->h;
    h.normal.image_bytes = read_file(o->image, "image");
    h.attacks = serve::parse_attack_list(o->attacks);
    double baseline_p99 = -1;
    if (!o->baseline.empty()) {
      const auto b = nlohmann::json::parse(read_file(o->baseline, "baseline"), nullptr, false);
      if (b.is_discarded() || !b.contains("normal"))
        throw FormatError("hostile-load: '" + o->baseline +
                          "' is not the --json output of a hostile-load run");
      baseline_p99 = b["normal"]["latency_ms"].value("p99", 0.0);
    }
    const auto r = serve::run_hostile_load(h);
    serve::HostileVerdict v;
    if (baseline_p99 >= 0) v = serve::judge_hostile_load(baseline_p99, r, o->rss_bound_mb);
    if (o->json) {
      auto j = r.to_json();
      j["options"] = {{"attacks", o->attacks},
                      {"attackers", h.attackers},
                      {"attack_seconds", h.attack_seconds},
                      {"attack_rate", h.attack_rate},
                      {"clients", h.normal.clients},
                      {"max_tokens", h.normal.max_tokens},
                      {"slow_connections", h.slow_connections},
                      {"idle_connections", h.idle_connections},
                      {"body_mb", h.body_mb},
                      {"gzip_mb", h.gzip_mb},
                      {"huge_side", h.huge_side},
                      {"max_image_pixels", h.max_image_pixels},
                      {"long_line_mb", h.long_line_mb},
                      {"header_lines", h.header_lines}};
      if (baseline_p99 >= 0)
        j["verdict"] = {{"pass", v.pass},           {"all_answered", v.all_answered},
                        {"p99_ratio", v.p99_ratio}, {"rss_checked", v.rss_checked},
                        {"rss_ok", v.rss_ok},       {"summary", v.summary}};
      std::cout << j.dump() << "\n";
      return;
    }
    const auto& n = r.normal;
    std::printf(
        "normal: %d ok, %d failed in %.1f s, %.2f req/s | latency P50 %.0f P99 %.0f ms | /health %d ok, %d "
        "failed, P99 %.0f ms | server peak RSS %.0f MB, %s after the run | tokens for gone clients %.0f\n",
        n.ok, n.failed, n.wall_s, n.requests_per_s, n.latency_ms.p50, n.latency_ms.p99, r.health_ok,
        r.health_failed, r.health_ms.p99, r.server_peak_rss_mb, r.server_alive ? "alive" : "NOT answering",
        r.tokens_for_gone_clients());
    for (const auto& [name, t] : r.attacks)
      std::printf("  %-24s sent %4d | %s | longest open %.1f s\n", name.c_str(), t.sent,
                  answers_text(t).c_str(), t.max_open_s);
    if (baseline_p99 >= 0) std::printf("%s\n", v.summary.c_str());
  });
}

}  // namespace vispco::cli
