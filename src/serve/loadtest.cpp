// Closed-loop load generator over cpp-httplib (see loadtest.h).
#include "serve/loadtest.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/errors.h"
#include "serve/data_url.h"

namespace vispco::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The server's resident memory from /metrics, or 0.
double server_rss_bytes(httplib::Client& c) {
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return 0;
  const std::string key = "\nvispco_resident_memory_bytes ";
  const auto p = res->body.find(key);
  return p == std::string::npos ? 0 : std::atof(res->body.c_str() + p + key.size());
}

}  // namespace

void LoadTestOptions::validate() const {
  if (clients < 1) throw InvalidArgument("loadtest: --clients must be ≥ 1, got " + std::to_string(clients));
  if (requests < 1)
    throw InvalidArgument("loadtest: --requests must be ≥ 1, got " + std::to_string(requests));
  if (max_tokens < 1)
    throw InvalidArgument("loadtest: --max-tokens must be ≥ 1, got " + std::to_string(max_tokens));
  if (!(time_limit_s > 0)) throw InvalidArgument("loadtest: --time-limit-s must be > 0");
  if (image_bytes.empty()) throw InvalidArgument("loadtest: no image");
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  const auto rank = [&](double q) {
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(k, 1, v.size()) - 1];
  };
  p.p50 = rank(0.5);
  p.p90 = rank(0.9);
  p.p99 = rank(0.99);
  p.max = v.back();
  double s = 0;
  for (double x : v) s += x;
  p.mean = s / static_cast<double>(v.size());
  return p;
}

json LoadTestResult::to_json() const {
  const auto pj = [](const Percentiles& p) {
    return json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}, {"mean", p.mean}};
  };
  return {{"ok", ok},
          {"failed", failed},
          {"failed_statuses", statuses},
          {"wall_s", wall_s},
          {"requests_per_s", requests_per_s},
          {"generated_tokens", generated_tokens},
          {"generated_tokens_per_s", generated_tokens_per_s},
          {"ttft_ms", pj(ttft_ms)},
          {"latency_ms", pj(latency_ms)},
          {"mean_batch_size", mean_batch_size},
          {"mean_decode_batch", mean_decode_batch},
          {"server_peak_rss_mb", server_peak_rss_mb}};
}

LoadTestResult run_load_test(const LoadTestOptions& o) {
  o.validate();
  {
    httplib::Client probe(o.host, o.port);
    auto res = probe.Get("/health");
    if (!res || res->status != 200)
      throw IoError("loadtest: no server answers GET /health at " + o.host + ":" + std::to_string(o.port));
  }
  json body = {{"max_tokens", o.max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"messages",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "image_url"},
                     {"image_url", {{"url", "data:image/png;base64," + encode_base64(o.image_bytes)}}}},
                    {{"type", "text"}, {"text", o.prompt}}}}}}}};
  if (!o.plan.empty()) body["vispco"] = {{"plan", o.plan}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  const std::string payload = body.dump();

  std::mutex mu;
  LoadTestResult r;
  std::vector<double> ttft, latency;
  double tokens = 0, batch_sum = 0, decode_batch_sum = 0;
  std::atomic<int> next{0};
  std::atomic<bool> done{false};
  std::atomic<double> peak_rss{0};
  const auto t0 = Clock::now();
  std::thread monitor([&] {
    httplib::Client c(o.host, o.port);
    while (!done) {
      peak_rss = std::max(peak_rss.load(), server_rss_bytes(c));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    peak_rss = std::max(peak_rss.load(), server_rss_bytes(c));
  });
  std::vector<std::thread> clients;
  for (int ci = 0; ci < o.clients; ++ci)
    clients.emplace_back([&] {
      httplib::Client c(o.host, o.port);
      c.set_read_timeout(static_cast<time_t>(o.time_limit_s) + 60, 0);
      while (next++ < o.requests &&
             std::chrono::duration<double>(Clock::now() - t0).count() < o.time_limit_s) {
        const auto start = Clock::now();
        double first = -1, n_tokens = 0, batch = 0, decode_batch = 0;
        bool finished = false, errored = false;
        std::string buf;
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.body = payload;
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
          buf.append(data, n);
          for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
            if (buf.compare(0, 6, "data: ") != 0) continue;
            const std::string ev = buf.substr(6, end - 6);
            if (ev == "[DONE]") {
              finished = true;
              continue;
            }
            const auto j = json::parse(ev, nullptr, false);
            if (j.is_discarded()) continue;
            if (j.contains("error")) errored = true;  // the server's 500 after the stream began
            if (j.contains("usage")) n_tokens = j["usage"].value("completion_tokens", 0.0);
            if (j.contains("vispco")) {
              batch = j["vispco"].value("batch_size", 0.0);
              decode_batch = j["vispco"].value("decode_batch_size", 0.0);
            }
            if (first < 0 && j.contains("choices") && !j["choices"].empty()) {
              const auto& d = j["choices"][0]["delta"];
              if (d.contains("content") && d["content"].is_string() &&
                  !d["content"].get<std::string>().empty())
                first = ms_since(start);
            }
          }
          return true;
        };
        auto res = c.send(req);
        const double total = ms_since(start);
        std::lock_guard<std::mutex> lock(mu);
        if (!res || res->status != 200 || !finished || errored) {
          ++r.failed;
          r.statuses.push_back(!res ? 0 : errored && res->status == 200 ? 500 : res->status);
          continue;
        }
        ++r.ok;
        latency.push_back(total);
        ttft.push_back(first >= 0 ? first : total);  // an empty answer: its first token is its end
        tokens += n_tokens;
        batch_sum += batch;
        decode_batch_sum += decode_batch;
      }
    });
  for (auto& t : clients) t.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  monitor.join();
  r.requests_per_s = r.ok / r.wall_s;
  r.generated_tokens = tokens;
  r.generated_tokens_per_s = tokens / r.wall_s;
  r.ttft_ms = percentiles(ttft);
  r.latency_ms = percentiles(latency);
  r.mean_batch_size = r.ok > 0 ? batch_sum / r.ok : 0;
  r.mean_decode_batch = r.ok > 0 ? decode_batch_sum / r.ok : 0;
  r.server_peak_rss_mb = peak_rss / 1048576.0;
  return r;
}

}  // namespace vispco::serve
