// `vispco serve`: loads a model once and serves OpenAI-style chat completions with a default pruning plan
// (src/serve/; docs/serving.md). SIGINT / SIGTERM stop accepting connections, finish the in-flight requests
// and exit 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "core/context.h"
#include "core/errors.h"
#include "core/text_file.h"
#include "eval/run_key.h"
#include "model/vlm.h"
#include "serve/plan_policy.h"
#include "serve/server.h"

namespace vispco::cli {
namespace {

int g_stop_pipe[2] = {-1, -1};

void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] const auto n = write(g_stop_pipe[1], &b, 1);  // async-signal-safe
}

// --max-prefill-tokens: "auto" is resolved by the caller; otherwise a count ≥ 0.
int64_t prefill_tokens(const std::string& text) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || n < 0)
    throw InvalidArgument("--max-prefill-tokens must be auto or a count ≥ 0, got '" + text + "'");
  return n;
}

}  // namespace

void register_serve(CLI::App& app) {
  struct Opts {
    std::string model, dtype = "auto", device = "cpu", port_file;
    QuantFlags quant;
    serve::SchedulerOptions sched;
    serve::ServerOptions server;
    int threads = 0;
    double max_body_mb = 20;
    double image_cache_mb = 256;
    std::string max_prefill_tokens = "auto";
    std::string frontier;
    double target_loss = -1, target_flops = -1;
    serve::ShadowOptions shadow;
    serve::GuardOptions guard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("serve", "Serve OpenAI-style chat completions (POST /v1/chat/completions)");
  cmd->add_option("--model", o->model, kModelHelp)->required();
  cmd->add_option("--plan", o->sched.default_plan,
                  "Default pruning plan (as generate's --plan); a request may name its own in vispco.plan")
      ->capture_default_str();
  cmd->add_option("--frontier", o->frontier,
                  "An optimize.json of this model: requests may then give vispco.max_accuracy_loss / "
                  "max_flops_ratio instead of a plan (docs/serving.md, Targets)");
  cmd->add_option("--target-accuracy-loss", o->target_loss,
                  "Default target: requests naming neither plan nor target run the cheapest frontier plan "
                  "whose loss bound (or estimate) is at most this; needs --frontier");
  cmd->add_option("--target-flops-ratio", o->target_flops,
                  "Default target: the cheapest frontier plan at most this FLOPs ratio (with "
                  "--target-accuracy-loss: both); needs --frontier");
  cmd->add_option(
         "--shadow-rate", o->shadow.rate,
         "Share of pruned greedy requests also run unpruned, in the background, to measure agreement "
         "(/metrics)")
      ->capture_default_str();
  cmd->add_option("--shadow-seed", o->shadow.seed, "Seed of the shadow draw")->capture_default_str();
  cmd->add_option("--guard-epsilon", o->guard.epsilon,
                  "Take a server-chosen plan out of service when its shadow agreement's Wilson upper bound "
                  "falls below 1 − this (its loss is shown to exceed it; 0 = off; needs --shadow-rate > 0)")
      ->capture_default_str();
  cmd->add_option("--guard-min-samples", o->guard.min_samples,
                  "Shadow samples of a plan before the guard may act on it")
      ->capture_default_str();
  cmd->add_option("--price-per-pflop", o->sched.price_per_pflop,
                  "Price of 10^15 prefill FLOPs: /metrics then counts the money spent and saved per plan")
      ->capture_default_str();
  cmd->add_option("--image-cache-mb", o->image_cache_mb,
                  "Image KV cache, MiB: a later question on the same image (plan none or a pre-LLM, "
                  "question-independent plan) skips the vision tower and the image's prefill; 0 = off")
      ->capture_default_str();
  cmd->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->server.port, "TCP port (0 = any free port)")->capture_default_str();
  cmd->add_option("--port-file", o->port_file, "Write the bound port to this file once listening");
  cmd->add_option("--model-name", o->server.model_name,
                  "Model id in /v1/models (default: the folder's name)");
  cmd->add_option("--max-batch", o->sched.max_batch, "Most rows of the decode batch (and of one prefill)")
      ->capture_default_str();
  cmd->add_option("--max-prefill-tokens", o->max_prefill_tokens,
                  "Most prompt tokens (text + visual) prefilled together; 0 = no limit; auto = 1024 on a CPU "
                  "with continuous batching (about one image: a batched prefill is slower per image there, "
                  "docs/serving.md), else no limit")
      ->capture_default_str();
  cmd->add_flag("--continuous-batching,!--no-continuous-batching", o->sched.continuous,
                "Admit same-plan requests into a running decode batch between steps")
      ->capture_default_str();
  cmd->add_option("--batch-window-ms", o->sched.batch_window_ms,
                  "Longest wait for more same-plan requests after the oldest arrived")
      ->capture_default_str();
  cmd->add_option("--max-queue", o->sched.max_queue, "Waiting requests beyond which the server answers 503")
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->server.limits.default_max_tokens,
                  "max_tokens of requests that name none")
      ->capture_default_str();
  cmd->add_option("--max-tokens-cap", o->server.limits.max_tokens_cap, "Largest max_tokens accepted")
      ->capture_default_str();
  cmd->add_option("--max-body-mb", o->max_body_mb, "Largest request body (413 above)")->capture_default_str();
  cmd->add_option(
         "--max-image-pixels", o->server.max_image_pixels,
         "Largest image in pixels preprocessing allocates (W·H, and max(W,H)² when the model pads to a "
         "square), read from the image's header before decoding (413 above)")
      ->capture_default_str();
  cmd->add_option("--max-preparing", o->server.max_preparing,
                  "Requests parsed, decoded and preprocessed at once (others wait)")
      ->capture_default_str();
  auto& lim = o->server.connections;
  cmd->add_option("--max-connections", lim.max_connections,
                  "Open connections served at once; one more is answered 503 and closed")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", lim.max_header_bytes, "Largest request line + headers, bytes")
      ->capture_default_str();
  cmd->add_option("--max-header-lines", lim.max_header_lines, "Most request line + header lines")
      ->capture_default_str();
  cmd->add_option("--header-timeout-s", lim.header_timeout_s,
                  "Request line and headers must arrive within this")
      ->capture_default_str();
  cmd->add_option("--request-timeout-s", lim.request_timeout_s,
                  "A whole request (headers + body) within this")
      ->capture_default_str();
  cmd->add_option("--idle-timeout-s", lim.idle_timeout_s, "Keep-alive: close a connection idle this long")
      ->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health (401 otherwise)");
  add_compute_flags(cmd, &o->dtype, &o->device, &o->threads);
  add_quant_flags(cmd, &o->quant);
  cmd->callback([o, cmd] {
    o->sched.default_plan = plan_for_model(o->model, o->sched.default_plan, cmd->count("--plan") > 0);
    o->server.max_body_bytes = static_cast<int64_t>(o->max_body_mb * 1048576.0);
    if (!(o->image_cache_mb >= 0 && o->image_cache_mb <= 1 << 20))
      throw InvalidArgument("--image-cache-mb must be in [0, 1048576], got " +
                            std::to_string(o->image_cache_mb));
    o->sched.image_cache_bytes = static_cast<int64_t>(o->image_cache_mb * 1048576.0);
    if (o->server.model_name.empty())
      o->server.model_name = std::filesystem::path(o->model).lexically_normal().filename().string();
    if (o->server.model_name.empty())
      o->server.model_name = std::filesystem::path(o->model).parent_path().filename().string();
    o->sched.validate();
    o->server.validate();
    // OpenCV refuses to decode images over this many pixels: a second guard behind the server's own check of
    // the image header (serve/server.cpp), which answers 413 first.
    setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(o->server.max_image_pixels).c_str(), 1);
    DtypeChoice dtype_choice;
    const RunContext ctx = inference_context(o->device, o->dtype, o->threads, &dtype_choice);
    o->sched.max_prefill_tokens = o->max_prefill_tokens != "auto" ? prefill_tokens(o->max_prefill_tokens)
                                  : ctx.device.is_cuda() || !o->sched.continuous ? 0
                                                                                 : 1024;
    o->sched.validate();
    serve::PolicyOptions policy_opts;
    if (!o->frontier.empty()) {
      policy_opts.frontier = serve::Frontier::load(o->frontier);
      policy_opts.frontier->check_model(eval::model_folder_hash(o->model), o->model);
    }
    if (o->target_loss >= 0) policy_opts.default_target.max_accuracy_loss = o->target_loss;
    if (o->target_flops >= 0) policy_opts.default_target.max_flops_ratio = o->target_flops;
    if (o->guard.epsilon > 0 && !(o->shadow.rate > 0))
      throw InvalidArgument("--guard-epsilon needs --shadow-rate > 0 (the guard acts on shadow agreement)");
    o->shadow.validate();
    o->guard.validate();
    policy_opts.default_target.validate();
    policy_opts.shadow = o->shadow;
    policy_opts.guard = o->guard;
    auto model = VisionLanguageModel::load(o->model, ctx);
    apply_quant(model, o->quant);
    if (o->sched.image_cache_bytes > 0) {  // image-cache keys name the weights and their quantisation
      try {
        o->sched.model_key = quant_model_key(eval::model_folder_hash(o->model), o->quant);
      } catch (const Error&) {
        o->sched.model_key = quant_model_key("dir:" + o->model, o->quant);
      }
    }
    serve::Metrics metrics;
    serve::declare_server_metrics(metrics);
    serve::BatchScheduler scheduler(model, o->model, o->sched, &metrics);
    serve::PlanPolicy policy(scheduler, &metrics, std::move(policy_opts), [](const std::string& line) {
      std::fprintf(stderr, "vispco serve: %s\n", line.c_str());
    });
    serve::ChatServer server(model, scheduler, metrics, o->server, &policy);
    // SIGINT / SIGTERM: the handler (any thread may run it: BLAS and OpenMP threads exist before main) only
    // writes the signal number to a pipe; a waiter thread reads it and shuts the server down gracefully.
    // Installed before the port file appears, so a supervisor that signals as soon as it reads it is heard.
    if (pipe(g_stop_pipe) != 0) throw IoError("serve: cannot create the signal pipe");
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const int port = server.bind();
    if (!o->port_file.empty())
      write_text_atomically(o->port_file, std::to_string(port) + "\n");  // whole or absent
    std::fprintf(
        stderr,
        "vispco serve: %s on http://%s:%d (plan %s, max batch %ld%s, prefill ≤ %s tokens, window %.1f ms, "
        "queue %ld, %s)\n",
        o->server.model_name.c_str(), o->server.host.c_str(), port, scheduler.resolve_plan("").c_str(),
        (long)o->sched.max_batch, o->sched.continuous ? " continuous" : "",
        o->sched.max_prefill_tokens > 0 ? std::to_string(o->sched.max_prefill_tokens).c_str() : "∞",
        o->sched.batch_window_ms, (long)o->sched.max_queue, dtype_choice.describe().c_str());
    std::thread waiter([&] {
      unsigned char sig = 0;
      if (read(g_stop_pipe[0], &sig, 1) != 1 || sig == 0) return;  // 0: main's wake-up after listen() ended
      std::fprintf(stderr, "vispco serve: signal %d, finishing in-flight requests\n", sig);
      server.shutdown();
    });
    server.listen();  // returns after shutdown(), once the connection threads have finished
    const unsigned char wake = 0;
    if (write(g_stop_pipe[1], &wake, 1) != 1)
      std::fprintf(stderr, "vispco serve: cannot wake the signal thread\n");
    waiter.join();
    scheduler.drain_and_stop();
    std::fprintf(stderr, "vispco serve: stopped\n");
  });
}

}  // namespace vispco::cli
