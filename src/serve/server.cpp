// OpenAI-compatible HTTP routes on cpp-httplib (see server.h).
#include "serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <semaphore>
#include <thread>

#include "core/errors.h"
#include "core/hash.h"
#include "io/image.h"
#include "io/image_header.h"
#include "model/chat_templates.h"
#include "serve/api_error.h"
#include "serve/http_guard.h"

namespace vispco::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Text a streamed request's provider is waiting for, filled on the worker thread.
struct StreamChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> deltas;
  bool finished = false;  // the job's result is set
  std::atomic<bool> gone{false};
};

std::string path_label(const std::string& path) {
  for (const char* p : {"/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == p) return p;
  return "other";
}

// JSON text with invalid UTF-8 (from a client's bytes or a byte-fallback token) replaced by U+FFFD: dump()'s
// default throws on it, and an exception outside httplib's routing would end the process.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(e.to_json()), "application/json");
}

// Decrements a counter when destroyed (a request's end, whichever way it ends).
struct InFlight {
  std::atomic<int>& n;
  explicit InFlight(std::atomic<int>& c) : n(c) { ++n; }
  ~InFlight() { --n; }
};

}  // namespace

void ServerOptions::validate() const {
  if (port < 0 || port > 65535)
    throw InvalidArgument("port must be in [0, 65535], got " + std::to_string(port));
  if (max_body_bytes < 1024)
    throw InvalidArgument("max_body_bytes must be ≥ 1024, got " + std::to_string(max_body_bytes));
  if (max_image_pixels < 1) throw InvalidArgument("max_image_pixels must be ≥ 1");
  if (limits.default_max_tokens < 1 || limits.max_tokens_cap < limits.default_max_tokens)
    throw InvalidArgument("max_tokens: need 1 ≤ default ≤ cap, got default " +
                          std::to_string(limits.default_max_tokens) + " and cap " +
                          std::to_string(limits.max_tokens_cap));
  if (max_preparing < 1)
    throw InvalidArgument("max_preparing must be ≥ 1, got " + std::to_string(max_preparing));
  connections.validate();
}

namespace {

// A loopback address: a web page's script can reach it through the browser, so its Host header is checked.
bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The host part of a Host header ("127.0.0.1:8080" → "127.0.0.1", "[::1]:8080" → "::1").
std::string host_name(const std::string& header) {
  if (!header.empty() && header[0] == '[') {
    const auto close = header.find(']');
    return close == std::string::npos ? header : header.substr(1, close - 1);
  }
  const auto colon = header.find(':');
  return colon == std::string::npos ? header : header.substr(0, colon);
}

// The largest image preprocessing may allocate for a W × H image: the square it pads to, if it pads.
int64_t allocated_pixels(int64_t w, int64_t h, bool pad_to_square) {
  const int64_t side = std::max(w, h);
  return pad_to_square ? side * side : w * h;
}

}  // namespace

struct ChatServer::Impl {
  VisionLanguageModel& model;
  BatchScheduler& scheduler;
  Metrics& metrics;
  ServerOptions opts;
  PlanPolicy* policy;
  GuardedHttpServer http;
  std::counting_semaphore<1 << 16> preparing;  // requests being parsed / decoded / preprocessed
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> in_flight{0};  // chat completions received and not yet fully answered

  Impl(VisionLanguageModel& m, BatchScheduler& s, Metrics& mt, ServerOptions o, PlanPolicy* p)
      : model(m),
        scheduler(s),
        metrics(mt),
        opts(std::move(o)),
        policy(p),
        http(opts.connections),
        preparing(opts.max_preparing) {}

  json completion_head(const std::string& id, const char* object) const {
    return {{"id", id},
            {"object", object},
            {"created", static_cast<int64_t>(std::time(nullptr))},
            {"model", opts.model_name}};
  }

  static json usage_of(const JobResult& r) {
    const auto n = static_cast<int64_t>(r.tokens.size());
    return {
        {"prompt_tokens", r.prompt_tokens}, {"completion_tokens", n}, {"total_tokens", r.prompt_tokens + n}};
  }

  static json vispco_block(const JobResult& r, const json& plan_info) {
    json j = {{"visual_tokens", r.n_visual},
              {"kept_visual_tokens", r.n_visual_kept},
              {"plan", r.plan},
              {"prefill_flops_ratio", r.prefill_flops_ratio},
              {"prefill_ms", r.prefill_ms},
              {"ttft_ms", r.ttft_ms},
              {"queue_ms", r.queue_ms},
              {"batch_size", r.batch_size},
              {"decode_batch_size", r.decode_batch_size},
              {"image_cache", r.image_cache}};
    for (const auto& [k, v] : plan_info.items()) j[k] = v;
    if (j.value("shadowed", false))
      j["shadow_note"] = "an unpruned rerun is queued; its comparison goes to /metrics, not to this reply";
    return j;
  }

  // Parses the body and prepares the job (connection thread). A full queue answers 503 before any of the
  // work; at most max_preparing requests are prepared at once. @throws ApiError.
  GenerationJob prepare(const httplib::Request& req, ChatRequest& cr, json& plan_info) {
    scheduler.check_admission();
    if (!preparing.try_acquire_for(std::chrono::duration<double>(opts.connections.request_timeout_s)))
      throw ApiError(503, "the server is busy preparing other requests; retry later", "server_error");
    struct Release {
      std::counting_semaphore<1 << 16>& s;
      ~Release() { s.release(); }
    } release{preparing};
    cr = parse_chat_request(req.body, opts.limits);
    if (!cr.model.empty() && cr.model != opts.model_name)
      throw ApiError(
          404, "the model '" + cr.model + "' does not exist; this server serves '" + opts.model_name + "'",
          "invalid_request_error", "model");
    // The plan (a target's pick, the guard's fallback) before any image work: an unmeetable target costs
    // nothing.
    std::optional<PlanChoice> choice;
    if (policy != nullptr)
      choice = policy->choose(cr.plan, cr.target, cr.gen.temperature);
    else if (!cr.target.empty())
      throw bad_request("this server has no frontier to meet a target with (start it with --frontier FILE)",
                        "vispco");
    io::ImageHeader header;
    try {
      header = io::read_image_header(cr.image_bytes);
    } catch (const Error& e) {
      throw bad_request(std::string("image_url: ") + e.what(), "messages");
    }
    const bool pads = model.preprocess_config().pad_to_square;
    const int64_t pixels = allocated_pixels(header.width, header.height, pads);
    if (header.width > opts.max_image_pixels || header.height > opts.max_image_pixels ||
        pixels > opts.max_image_pixels)
      throw ApiError(413,
                     "image of " + std::to_string(header.width) + "x" + std::to_string(header.height) +
                         " pixels" + (pads ? " (padded to a square of its longer side)" : "") +
                         " is over this server's limit of " + std::to_string(opts.max_image_pixels) +
                         " pixels",
                     "invalid_request_error", "messages");
    cv::Mat rgb;
    try {
      rgb = io::decode_image_rgb(cr.image_bytes);
    } catch (const Error&) {
      throw bad_request("image_url: the data is not a decodable " + header.format + " image", "messages");
    }
    if (allocated_pixels(rgb.cols, rgb.rows, pads) > opts.max_image_pixels)  // EXIF rotation keeps the area
      throw ApiError(413,
                     "image over this server's limit of " + std::to_string(opts.max_image_pixels) + " pixels",
                     "invalid_request_error", "messages");
    GenerationJob job;
    try {
      job.request = {model.preprocess(rgb), conversation_prompt_ids(model, cr.messages)};
    } catch (const Error& e) {
      throw bad_request(std::string("prompt: ") + e.what(), "messages");
    }
    if (scheduler.image_cache_enabled()) job.image_sha256 = sha256_hex(cr.image_bytes);
    const auto& ids = job.request.prompt_ids;
    if (std::count(ids.begin(), ids.end(), model.shape().image_token_id) != 1)
      throw bad_request(
          "the text may not contain the image token itself (the image goes in an image_url part)",
          "messages");
    const int64_t n_positions =
        static_cast<int64_t>(ids.size()) - 1 + model.shape().n_visual_tokens + cr.gen.max_new_tokens;
    if (n_positions > model.shape().max_positions)
      throw bad_request("prompt (" + std::to_string(ids.size() - 1) + " text tokens + the image's " +
                            std::to_string(model.shape().n_visual_tokens) + ") plus max_tokens (" +
                            std::to_string(cr.gen.max_new_tokens) + ") exceeds the model's context of " +
                            std::to_string(model.shape().max_positions) + " positions",
                        "max_tokens");
    job.gen = cr.gen;
    job.plan = cr.plan;
    if (choice) {
      policy->arm(job, *choice);  // the shadow draw, now that the request passed every check
      plan_info = choice->info;
    }
    job.question = cr.question;
    job.stop = cr.stop;
    job.top_logprobs = cr.top_logprobs;
    return job;
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = Clock::now();
    auto guard = std::make_shared<InFlight>(in_flight);  // a streamed answer keeps it until its last chunk
    ChatRequest cr;
    GenerationJob job;
    json plan_info = json::object();  // the plan policy's decision, for the reply's vispco block
    try {
      job = prepare(req, cr, plan_info);
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    const std::string id = "chatcmpl-" + std::to_string(next_id++);
    if (!cr.stream) {
      auto cancelled = std::make_shared<std::atomic<bool>>(false);
      job.cancelled = cancelled;
      std::future<JobResult> fut;
      try {
        fut = scheduler.submit(std::move(job));
      } catch (const ApiError& e) {
        return send_error(res, e);
      }
      // A client that goes away stops its request at the next decode step.
      while (fut.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
        if (!cancelled->load() && GuardedHttpServer::client_gone()) cancelled->store(true);
      const JobResult r = fut.get();
      if (cancelled->load()) return;  // nobody to answer
      if (!r.error.empty())
        return send_error(res, ApiError(500, "generation failed: " + r.error, "server_error"));
      json out = completion_head(id, "chat.completion");
      json choice = {{"index", 0},
                     {"message", {{"role", "assistant"}, {"content", r.text}}},
                     {"logprobs", nullptr},
                     {"finish_reason", r.finish_reason}};
      if (!r.logprobs.is_null()) choice["logprobs"] = {{"content", r.logprobs}};
      out["choices"] = json::array({choice});
      out["usage"] = usage_of(r);
      out["vispco"] = vispco_block(r, plan_info);
      res.set_content(dump(out), "application/json");
      metrics.observe("vispco_request_latency_seconds",
                      std::chrono::duration<double>(Clock::now() - t0).count());
      return;
    }
    auto ch = std::make_shared<StreamChannel>();
    job.on_delta = [ch](const std::string& d) {
      if (ch->gone) return false;
      {
        std::lock_guard<std::mutex> lock(ch->mu);
        ch->deltas.push_back(d);
      }
      ch->cv.notify_all();
      return true;
    };
    job.on_finish = [ch] {
      {
        std::lock_guard<std::mutex> lock(ch->mu);
        ch->finished = true;
      }
      ch->cv.notify_all();
    };
    auto fut = std::make_shared<std::future<JobResult>>();
    try {
      *fut = scheduler.submit(std::move(job));
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    const json head = completion_head(id, "chat.completion.chunk");
    const bool include_usage = cr.include_usage;
    auto first = std::make_shared<bool>(true);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, ch, fut, head, include_usage, first, t0, plan_info](size_t, httplib::DataSink& sink) {
          try {  // nothing may escape: httplib calls providers outside its exception handling
            const auto send = [&](const json& j) {
              const std::string s = "data: " + dump(j) + "\n\n";
              if (!sink.write(s.data(), s.size())) {
                ch->gone = true;
                return false;
              }
              return true;
            };
            const auto chunk = [&](const json& delta, const json& finish) {
              json c = head;
              c["choices"] = json::array(
                  {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}});
              return c;
            };
            if (*first) {
              *first = false;
              if (!send(chunk({{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
            }
            std::deque<std::string> ready;
            bool finished = false;
            {
              std::unique_lock<std::mutex> lock(ch->mu);
              ch->cv.wait_for(lock, std::chrono::milliseconds(100),
                              [&] { return !ch->deltas.empty() || ch->finished; });
              ready.swap(ch->deltas);
              finished = ready.empty() && ch->finished;
            }
            for (const auto& d : ready)
              if (!send(chunk({{"content", d}}, nullptr))) return false;
            if (!finished) return true;
            const JobResult r = fut->get();
            if (!r.error.empty()) {
              send(ApiError(500, "generation failed: " + r.error, "server_error").to_json());
            } else {
              json last = chunk(json::object(), r.finish_reason);
              if (!r.logprobs.is_null()) last["choices"][0]["logprobs"] = {{"content", r.logprobs}};
              last["vispco"] = vispco_block(r, plan_info);
              if (!send(last)) return false;
              if (include_usage) {
                json u = head;
                u["choices"] = json::array();
                u["usage"] = usage_of(r);
                if (!send(u)) return false;
              }
            }
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
            metrics.observe("vispco_request_latency_seconds",
                            std::chrono::duration<double>(Clock::now() - t0).count());
            return true;
          } catch (const std::exception&) {
            ch->gone = true;
            return false;
          }
        },
        [ch, guard](bool) { ch->gone = true; });
  }

  // @throws ApiError for a request head this server refuses (see routes()).
  void check_request_head(const httplib::Request& q) const {
    if (q.has_header("Transfer-Encoding"))
      throw ApiError(411, "chunked request bodies are not accepted; send a Content-Length");
    const auto enc = q.get_header_value("Content-Encoding");
    if (!enc.empty() && enc != "identity")
      throw ApiError(415, "compressed request bodies (Content-Encoding: " + enc + ") are not accepted");
    const bool has_length = q.has_header("Content-Length");
    if (q.method == "POST" && q.path == "/v1/chat/completions" && !has_length)
      throw ApiError(411, "a request body needs a Content-Length header (chunked bodies are not accepted)");
    if (has_length && q.path != "/v1/chat/completions" && q.get_header_value("Content-Length") != "0")
      throw ApiError(413, "this route takes no request body");
    if (q.method != "POST" && has_length && q.get_header_value("Content-Length") != "0")
      throw ApiError(405, "method " + q.method + " is not allowed on " + q.path + " (use POST)");
    if (is_loopback(opts.host)) {
      const std::string h = host_name(q.get_header_value("Host"));
      if (!h.empty() && !is_loopback(h))
        throw ApiError(403, "Host '" + h + "' is not this loopback server (a browser page may not reach it)");
    }
    if (!opts.api_key.empty() && q.path != "/health" &&
        q.get_header_value("Authorization") != "Bearer " + opts.api_key)
      throw ApiError(401, "missing or wrong API key (send Authorization: Bearer <key>)",
                     "invalid_request_error");
  }

  void routes() {
    http.set_body_limit(opts.max_body_bytes);
    // Before any body is read (every method, every path): httplib bounds a body by its Content-Length only,
    // so bodies without one (chunked) and compressed ones (inflated without a cap) are refused; then the
    // Host check (DNS rebinding against a loopback server) and the API key.
    http.set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
      try {
        check_request_head(q);
      } catch (const ApiError& e) {
        send_error(r, e);
        if (e.status() == 401) r.set_header("WWW-Authenticate", "Bearer");
        r.set_header("Connection", "close");
        GuardedHttpServer::close_after_response();  // its body, if any, is never read
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& q, httplib::Response& r) { chat(q, r); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      json m = {{"id", opts.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "vispco"}};
      r.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& r) {
      r.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      metrics.set("vispco_queue_depth", static_cast<double>(scheduler.queue_depth()));
      r.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    const auto not_allowed = [](const char* allow) {
      return [allow](const httplib::Request& q, httplib::Response& r) {
        r.set_header("Allow", allow);
        send_error(
            r, ApiError(405, "method " + q.method + " is not allowed on " + q.path + " (use " + allow + ")"));
      };
    };
    http.Get("/v1/chat/completions", not_allowed("POST"));
    http.Put("/v1/chat/completions", not_allowed("POST"));
    http.Delete("/v1/chat/completions", not_allowed("POST"));
    for (const char* p : {"/v1/models", "/health", "/metrics"}) {
      http.Post(p, not_allowed("GET"));
      http.Put(p, not_allowed("GET"));
      http.Delete(p, not_allowed("GET"));
    }
    http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      try {  // called outside httplib's exception handling
        const std::string msg = r.status == 404   ? "unknown path " + q.path
                                : r.status == 413 ? std::string("request body over the server's size limit")
                                                  : "HTTP error " + std::to_string(r.status);
        send_error(r, ApiError(r.status, msg));
      } catch (...) {
        r.set_content(
            R"({"error":{"message":"error","type":"invalid_request_error","param":null,"code":null}})",
            "application/json");
      }
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(r, ApiError(500, what, "server_error"));
    });
    http.set_logger([this](const httplib::Request& q, const httplib::Response& r) {
      metrics.add("vispco_http_requests_total", 1,
                  {{"path", path_label(q.path)}, {"code", std::to_string(r.status)}});
    });
  }
};

ChatServer::ChatServer(VisionLanguageModel& model, BatchScheduler& scheduler, Metrics& metrics,
                       ServerOptions opts, PlanPolicy* policy) {
  opts.validate();
  impl_ = std::make_unique<Impl>(model, scheduler, metrics, std::move(opts), policy);
  impl_->routes();
}

ChatServer::~ChatServer() { stop(); }

int ChatServer::bind() {
  auto& o = impl_->opts;
  if (o.port == 0) {
    const int p = impl_->http.bind_to_any_port(o.host);
    if (p <= 0) throw IoError("serve: cannot bind " + o.host + " to a free port");
    o.port = p;
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    throw IoError("serve: cannot bind " + o.host + ":" + std::to_string(o.port) +
                  " (in use, or not an address of this machine)");
  }
  impl_->http.set_listen_backlog(std::max(64, 2 * o.connections.max_connections));
  return o.port;
}

void ChatServer::listen() { impl_->http.listen_after_bind(); }

void ChatServer::stop() {
  if (impl_) impl_->http.stop_listening();  // also before listen() has started (then it returns at once)
}

void ChatServer::shutdown() {
  impl_->scheduler.stop_accepting();
  while (impl_->in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->scheduler.wait_idle();
  while (!impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->http.stop();
}

}  // namespace vispco::serve
