// The server's batch scheduler: requests wait in one bounded FIFO queue; a worker thread owns the model and
// one running decode batch (model/decode_batch.h). When the batch is empty it takes the oldest request's plan
// and gathers every waiting request with the same plan (up to max_batch, waiting at most the batch window for
// more) into one prefill. While the batch decodes, continuous batching (on by default) admits newcomers of
// the batch's plan between decode steps — each admitted group is prefilled on its own and its KV cache joins
// the running one — as long as the oldest waiting request has that plan and rows are free; requests with
// different plans (different K) are never padded into one prefill (group by K) and wait for the batch to
// drain. A row leaves when it finishes. HTTP threads only enqueue and wait. Background work (shadow runs,
// serve/shadow.h) waits in its own queue and is started only when no request waits (submit_background()).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model/decode_batch.h"
#include "model/generate.h"
#include "model/vlm.h"
#include "prune/bound_plan.h"
#include "serve/image_cache.h"
#include "serve/metrics.h"

namespace vispco::serve {

/// Scheduler settings (plain value; validate() names the bad field).
struct SchedulerOptions {
  int64_t max_batch = 8;       ///< most rows of the decode batch (and so of one prefill), ≥ 1
  double batch_window_ms = 5;  ///< longest wait for more same-plan requests after the oldest arrived, ≥ 0
  int64_t max_queue = 64;      ///< waiting requests beyond which submit() answers 503, ≥ 1
  /// Most prompt tokens (text + N_v visual tokens before pruning) prefilled together; a request larger than
  /// this is prefilled alone. 0 = no limit (max_batch alone bounds a prefill). With continuous batching a low
  /// budget prefills requests one by one and still decodes them as one batch (TGI's
  /// max-batch-prefill-tokens).
  int64_t max_prefill_tokens = 0;
  std::string default_plan = "none";  ///< plan of requests that name none
  /// Waiting background jobs (shadow runs) beyond which submit_background() drops new ones, ≥ 0.
  int64_t max_background_queue = 64;
  /// Price of one PFLOP (10¹⁵ FLOPs) of decoder prefill, in the operator's currency; 0 = no cost counter
  /// (serve/cost_meter.h). ≥ 0.
  double price_per_pflop = 0;
  /// Admit same-plan requests into a running decode batch (false: a batch runs to its end before the next
  /// one is formed).
  bool continuous = true;
  /// Capacity of the image KV cache (serve/image_cache.h) in bytes; 0 disables it. With it, requests of an
  /// image_cacheable() plan that carry GenerationJob::image_sha256 are prefilled in two halves (the prompt up
  /// to and including the image, cached; then the rest), on a hit from the cached half. ≥ 0.
  int64_t image_cache_bytes = int64_t{256} << 20;
  /// The served model's identity in image-cache keys, quantisation included (`vispco serve`:
  /// "sha256:…+quant:int8"); "" = eval::model_folder_hash(model_dir) (or the folder's path when it cannot
  /// be hashed).
  std::string model_key;
  /// @throws InvalidArgument naming the field.
  void validate() const;
};

struct JobResult;

/// One request as the worker runs it.
struct GenerationJob {
  VlmRequest request;    ///< preprocessed pixels + prompt ids
  GenerationConfig gen;  ///< this row's decoding settings
  std::string plan;      ///< plan text ("" → the default plan); keep=auto plans get K per request
  std::string question;  ///< the current question (keep=auto reads its embedding)
  /// SHA-256 (hex) of the encoded image bytes the client sent; "" = do not use the image cache for this job.
  std::string image_sha256;
  std::vector<std::string> stop;  ///< stop sequences (serve/text_stream.h)
  int64_t top_logprobs = -1;      ///< −1 off, else 0–20
  /// Streaming: called on the worker thread with each new piece of answer text; returning false (client
  /// gone) ends the row. Empty for non-streamed requests.
  std::function<bool(const std::string& delta)> on_delta;
  /// Called on the worker thread right after the job's result is set (wakes a streaming handler at once).
  std::function<void()> on_finish;
  /// Set (by the HTTP thread) when the client has gone: the row ends at its next decode step. May be null.
  std::shared_ptr<std::atomic<bool>> cancelled;
  /// Called on the worker thread after the job was answered successfully (not cancelled, its client still
  /// there), before its handler wakes; e.g. to queue its shadow run (serve/shadow.h). Must not throw.
  std::function<void(const GenerationJob& job, const JobResult& r)> on_answered;
  /// Background jobs (submit_background) only: receives the result on the worker thread. Must not throw.
  std::function<void(const JobResult& r)> on_result;
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
  double prefill_flops_ratio = 1;     ///< this row's decoder prefill FLOPs / unpruned (cost/flops.h)
  double prefill_flops = 0;           ///< this row's decoder prefill FLOPs with the plan (cost/flops.h)
  double prefill_flops_unpruned = 0;  ///< the same row's decoder prefill FLOPs unpruned
  double queue_ms = 0;                ///< enqueue → batch start
  double prefill_ms = 0;              ///< the batch's decoder prefill
  double ttft_ms = 0;                 ///< enqueue → first token
  int64_t batch_size = 0;             ///< rows of the prefill batch this job ran in
  int64_t decode_batch_size = 0;      ///< most rows decoded together in one step while this job ran
  std::string error;                  ///< non-empty when generation failed (the server answers 500)
  /// The image KV cache for this job: "hit" (its image prefix came from the cache), "miss" (computed and
  /// stored), "off" (not used: cache disabled, a plan whose kept tokens depend on the question, or no hash).
  std::string image_cache = "off";
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
  /// The plan bound by the front door (prune/bound_plan.h) once per canonical text and cached ("" → the
  /// default plan). @throws what resolve_plan() throws.
  BoundPlan bound_plan(const std::string& plan) const;
  /// Cheap admission check before a request is prepared: @throws ApiError 503 when max_queue requests wait or
  /// the scheduler is draining (submit() checks again).
  void check_admission() const;
  /// Enqueues a job (its plan resolved first). @throws ApiError 503 when max_queue requests wait or the
  /// scheduler is draining; ApiError 400 for a plan resolve_plan() refuses.
  std::future<JobResult> submit(GenerationJob job);
  /// Enqueues background work (a shadow run): it never waits in the request queue and is started only when
  /// no request waits there — a new batch is formed from background jobs only when the queue is empty, and
  /// background jobs join a running batch only while the queue is empty. Once started, a background batch
  /// runs to its end (a request of another plan that arrives meanwhile waits for it, at most max_tokens
  /// decode steps). Its result goes to job.on_result; nobody waits for it; request metrics do not count it.
  /// Background jobs still queued at drain_and_stop() are dropped: on_result gets an error. @return false
  /// (job dropped) when max_background_queue jobs wait, the scheduler is draining, or the plan cannot be
  /// bound.
  bool submit_background(GenerationJob job);
  /// Stops taking jobs: submit() answers 503 from now on; queued and running jobs go on.
  void stop_accepting();
  /// Blocks until no job waits or runs; with `background`, no background job either.
  void wait_idle(bool background = false);
  /// stop_accepting(), finishes every queued job, joins the worker. Idempotent.
  void drain_and_stop();
  /// Requests waiting (not yet in a batch).
  size_t queue_depth() const;
  /// Plans held in the scheduler's caches (bound static plans + keep=auto plans), by canonical text.
  size_t cached_plan_count() const;
  /// Whether the image KV cache is on (SchedulerOptions::image_cache_bytes > 0).
  bool image_cache_enabled() const { return image_cache_->enabled(); }
  /// The image KV cache (its counters, for tests and /metrics).
  const ImageCache& image_cache() const { return *image_cache_; }

 private:
  struct Pending {
    GenerationJob job;
    BoundPlan plan;        // the static plan it runs; for keep=auto set by the worker before batching
    std::string plan_key;  // plan.text(): requests of one key share a prefill
    BoundPlan auto_plan;   // keep=auto plan still to resolve (unpruned = none or resolved)
    bool auto_pending = false;
    std::chrono::steady_clock::time_point enqueued;
    std::promise<JobResult> promise;
  };
  void worker();
  // Resolves the queued keep=auto jobs: one tower + feature pass over them (lock released meanwhile), K from
  // the plan's predictor, plan_key = the static plan at K. Jobs whose prediction fails are answered with the
  // error and leave the queue. Called by the worker with `lock` held.
  void resolve_auto_keep(std::unique_lock<std::mutex>& lock);
  // Bound plans by canonical text, oldest evicted first at `capacity` (under mu_; jobs hold their own copy,
  // so eviction is safe).
  struct PlanCache {
    size_t capacity = 0;
    std::map<std::string, BoundPlan> plans;
    std::deque<std::string> order;
    const BoundPlan* find(const std::string& key) const;
    const BoundPlan& insert(const std::string& key, BoundPlan plan);
  };
  // Requests of plan `key` taken out of the queue, oldest first, at most n and within the prefill token
  // budget (the first always). Called with mu_ held.
  std::vector<std::unique_ptr<Pending>> take_plan(const std::string& key, int64_t n);
  // The same from the background queue.
  std::vector<std::unique_ptr<Pending>> take_background(const std::string& key, int64_t n);
  std::vector<std::unique_ptr<Pending>> take_from(std::deque<std::unique_ptr<Pending>>& q,
                                                  const std::string& key, int64_t n);
  // Prefills a same-plan group and joins it to the decode batch; on failure answers the group with the error.
  void admit(std::vector<std::unique_ptr<Pending>>& group);
  struct Active;
  // admit()'s prefill through the image cache (image_cacheable plans): each row's image prefix from the
  // cache, or — for the misses, together — computed in one batch (DecodeBatch::prefill_image_prefixes) and
  // stored, then the rest of the prompts as one group. Sets each row's image_cache, its own prefill_ms and
  // its decoder tokens per layer (row_tokens). @throws what DecodeBatch throws.
  GenerationStats admit_cached(std::vector<std::unique_ptr<Active>>& joining, const BoundPlan& bound,
                               const std::vector<VlmRequest>& reqs,
                               const std::vector<GenerationConfig>& configs, const std::vector<int64_t>& ids,
                               const std::vector<int64_t>& top_logprobs,
                               std::vector<std::vector<int64_t>>& row_tokens);
  // One decode step of the batch; answers the rows that finish. On failure answers every row with the error.
  void decode_step();
  // Prompt tokens of a waiting request: text + N_v visual tokens before pruning.
  int64_t prompt_tokens(const Pending& p) const;
  // Answers every row of the decode batch with `error` and starts an empty batch.
  void fail_all(const std::string& error);
  void answer(Active& a, std::vector<int64_t> tokens, const std::string& finish_reason,
              const std::vector<StepLogprobs>& step_logprobs);

  VisionLanguageModel& model_;
  std::string model_dir_;
  SchedulerOptions opts_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  std::deque<std::unique_ptr<Pending>> background_;  // shadow runs: started only when queue_ is empty
  bool draining_ = false, accepting_ = true;
  int64_t running_ = 0;  // jobs being prefilled or decoded
  // Worker thread only: the decode batch, its plan and its jobs by row id.
  std::unique_ptr<DecodeBatch> batch_;
  std::string batch_plan_;
  std::map<int64_t, std::unique_ptr<Active>> active_;
  int64_t next_row_id_ = 0;
  std::condition_variable idle_cv_;
  // Static plans (each may hold a gate's weights) and keep=auto plans (each a loaded predictor and its rungs'
  // plans), bound once per canonical text (issue 45: both bounded).
  mutable PlanCache static_plans_, auto_plans_;
  std::unique_ptr<ImageCache> image_cache_;
  std::string model_key_;  // ImageCacheKey::model
  std::thread worker_;
};

/// Declares the scheduler's and server's metrics on `m` (names in docs/serving.md).
void declare_server_metrics(Metrics& m);

}  // namespace vispco::serve
