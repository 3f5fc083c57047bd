// The server's batch scheduler: requests wait in one bounded FIFO queue; a worker thread takes the oldest
// request's plan and gathers every waiting request with the same plan (up to max_batch, waiting at most the
// batch window for more) into one generate() call — requests with different plans (different K) are never
// padded into one batch (group by K). Decode continues as a batch and a finished row leaves it
// (model/generate.h). One worker owns the model; HTTP threads only enqueue and wait.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "model/generate.h"
#include "model/llava.h"
#include "serve/metrics.h"

namespace vispco::serve {

/// Scheduler settings (plain value; validate() names the bad field).
struct SchedulerOptions {
  int64_t max_batch = 8;       ///< most requests per prefill batch, ≥ 1
  double batch_window_ms = 5;  ///< longest wait for more same-plan requests after the oldest arrived, ≥ 0
  int64_t max_queue = 64;      ///< waiting requests beyond which submit() answers 503, ≥ 1
  std::string default_plan = "none";  ///< plan of requests that name none
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

/// One request as the worker runs it.
struct GenerationJob {
  VlmRequest request;             ///< preprocessed pixels + prompt ids
  GenerationConfig gen;           ///< this row's decoding settings
  std::string plan;               ///< plan text ("" → the default plan); keep=auto plans get K per request
  std::string question;           ///< the user's text (keep=auto reads the question's embedding)
  std::vector<std::string> stop;  ///< stop sequences (serve/text_stream.h)
  int64_t top_logprobs = -1;      ///< −1 off, else 0–20
  /// Streaming: called on the worker thread with each new piece of answer text; returning false (client
  /// gone) ends the row. Empty for non-streamed requests.
  std::function<bool(const std::string& delta)> on_delta;
  /// Called on the worker thread right after the job's result is set (wakes a streaming handler at once).
  std::function<void()> on_finish;
};

/// What a job produced.
struct JobResult {
  std::string text;             ///< the answer (trimmed, cut at a stop sequence)
  std::vector<int64_t> tokens;  ///< generated ids (EOS excluded)
  std::string finish_reason;    ///< "stop" | "length"
  nlohmann::json logprobs;      ///< OpenAI logprobs.content array, or null
  std::string plan;             ///< the resolved plan's canonical text
  int64_t prompt_tokens = 0;    ///< text tokens + N_v (the image's tokens, before pruning)
  int64_t n_visual = 0, n_visual_kept = 0;
  double prefill_flops_ratio = 1;  ///< this row's decoder prefill FLOPs / unpruned (cost/flops.h)
  double queue_ms = 0;             ///< enqueue → batch start
  double prefill_ms = 0;           ///< the batch's decoder prefill
  double ttft_ms = 0;              ///< enqueue → first token
  int64_t batch_size = 0;          ///< rows of the prefill batch this job ran in
  std::string error;               ///< non-empty when generation failed (the server answers 500)
};

/// The batch scheduler and its worker thread.
class BatchScheduler {
 public:
  /// Starts the worker. @param model_dir where scorers find their files (the learned gate)
  /// @param metrics where queue, batch and token metrics go (may be null). @throws InvalidArgument for bad
  /// options or a default plan that does not fit the model.
  BatchScheduler(VisionLanguageModel& model, std::string model_dir, SchedulerOptions opts, Metrics* metrics);
  /// Drains and stops.
  ~BatchScheduler();
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  /// The canonical text of a plan as it would run ("" → the default plan), validated against the model.
  /// @throws InvalidArgument / ConfigError from prune/plan.h and the scorers (an unknown scorer, K out of
  /// range, a missing gate file).
  std::string resolve_plan(const std::string& plan) const;
  /// Enqueues a job (its plan resolved first). @throws ApiError 503 when max_queue requests wait or the
  /// scheduler is draining; ApiError 400 for a plan resolve_plan() refuses.
  std::future<JobResult> submit(GenerationJob job);
  /// Stops taking jobs: submit() answers 503 from now on; queued and running jobs go on.
  void stop_accepting();
  /// Blocks until no job waits or runs.
  void wait_idle();
  /// stop_accepting(), finishes every queued job, joins the worker. Idempotent.
  void drain_and_stop();
  /// Requests waiting (not yet in a batch).
  size_t queue_depth() const;

 private:
  struct Pending {
    GenerationJob job;
    std::string plan_key;   // the static plan it runs; for keep=auto set by the worker before batching
    std::string auto_text;  // keep=auto plan still to resolve ("" = none or resolved)
    std::chrono::steady_clock::time_point enqueued;
    std::promise<JobResult> promise;
  };
  void worker();
  // Resolves the queued keep=auto jobs: one tower + feature pass over them (lock released meanwhile), K from
  // the plan's predictor, plan_key = the static plan at K. Jobs whose prediction fails are answered with the
  // error and leave the queue. Called by the worker with `lock` held.
  void resolve_auto_keep(std::unique_lock<std::mutex>& lock);
  struct AutoPredictor;
  // keep=auto plan text → its parsed plan and predictor (loaded once, by resolve_plan).
  const AutoPredictor& auto_predictor(const std::string& text) const;
  void run_batch(std::vector<std::unique_ptr<Pending>>& batch);

  VisionLanguageModel& model_;
  std::string model_dir_;
  SchedulerOptions opts_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  bool draining_ = false, accepting_ = true;
  int64_t running_ = 0;  // jobs in the batch being generated
  std::condition_variable idle_cv_;
  mutable std::set<std::string> valid_plans_;  // plan texts already validated (under mu_)
  mutable std::map<std::string, std::shared_ptr<AutoPredictor>> auto_predictors_;  // under mu_
  std::thread worker_;
};

/// Declares the scheduler's and server's metrics on `m` (names in docs/serving.md).
void declare_server_metrics(Metrics& m);

}  // namespace vispco::serve
