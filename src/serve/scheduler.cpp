// Batch scheduler: group waiting requests by plan into a continuously batched decode (see scheduler.h).
#include "serve/scheduler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <map>

#include "core/errors.h"
#include "cost/flops.h"
#include "cost/timer.h"
#include "eval/run_key.h"
#include "model/decode_batch.h"
#include "model/logprobs.h"
#include "prune/auto_keep/k_features.h"
#include "prune/plan_hook.h"
#include "serve/api_error.h"
#include "serve/cost_meter.h"
#include "serve/text_stream.h"

namespace vispco::serve {
namespace {

constexpr size_t kMaxCachedPlans =
    256;                              // bound static plans kept (each its scorers, a gate's weights at most)
constexpr size_t kMaxAutoPlans = 16;  // bound keep=auto plans kept (each a loaded predictor + its rungs)

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A row's decoder tokens per layer in a batch prefill: the batch's per-layer counts less the row's left
// padding (T_max − T_row positions in every layer).
std::vector<int64_t> row_tokens_of(const GenerationStats& st, int64_t n_text) {
  const int64_t pad = st.n_text_max - n_text;
  std::vector<int64_t> row = st.tokens_per_layer;
  for (auto& n : row) n -= pad;
  return row;
}

// Fills the row's decoder prefill FLOPs (pruned and unpruned) and their ratio. @param row its tokens per
// layer
void row_flops(const ModelShape& shape, const std::vector<int64_t>& row, int64_t n_text, JobResult& r) {
  r.prefill_flops = static_cast<double>(prefill_flops(shape.flops, row).decoder_total);
  r.prefill_flops_unpruned = static_cast<double>(
      prefill_flops(shape.flops, unpruned_tokens_per_layer(shape.flops, n_text)).decoder_total);
  r.prefill_flops_ratio = r.prefill_flops / r.prefill_flops_unpruned;
}

// Hands a job its result and wakes its handler; nothing of it may throw out of the worker thread.
void deliver(std::promise<JobResult>& promise, JobResult r, const GenerationJob& job) {
  const auto& on_finish = job.on_finish;
  if (job.on_result) {  // a background job: nobody waits on its future
    try {
      job.on_result(r);
    } catch (...) {
    }
  }
  try {
    promise.set_value(std::move(r));
  } catch (const std::future_error&) {  // already answered: keep the first answer
  }
  if (on_finish) {
    try {
      on_finish();
    } catch (...) {  // the handler's wake-up only; the answer is already set
    }
  }
}

}  // namespace

void SchedulerOptions::validate() const {
  if (max_batch < 1) throw InvalidArgument("max_batch must be ≥ 1, got " + std::to_string(max_batch));
  if (!(batch_window_ms >= 0))
    throw InvalidArgument("batch_window_ms must be ≥ 0, got " + std::to_string(batch_window_ms));
  if (max_queue < 1) throw InvalidArgument("max_queue must be ≥ 1, got " + std::to_string(max_queue));
  if (max_background_queue < 0)
    throw InvalidArgument("max_background_queue must be ≥ 0, got " + std::to_string(max_background_queue));
  if (!(price_per_pflop >= 0) || !std::isfinite(price_per_pflop))
    throw InvalidArgument("price_per_pflop must be a finite number ≥ 0, got " +
                          std::to_string(price_per_pflop));
  if (max_prefill_tokens < 0)
    throw InvalidArgument("max_prefill_tokens must be ≥ 0, got " + std::to_string(max_prefill_tokens));
  if (image_cache_bytes < 0)
    throw InvalidArgument("image_cache_bytes must be ≥ 0, got " + std::to_string(image_cache_bytes));
}

void declare_server_metrics(Metrics& m) {
  const std::vector<double> secs = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  m.declare("vispco_http_requests_total", "counter", "HTTP requests answered, by path and status code");
  m.declare("vispco_queue_wait_seconds", "histogram", "Time from enqueue to the start of the request's batch",
            secs);
  m.declare("vispco_ttft_seconds", "histogram", "Time from enqueue to the first generated token", secs);
  m.declare("vispco_prefill_seconds", "histogram", "Decoder prefill time of the request's batch", secs);
  m.declare("vispco_request_latency_seconds", "histogram",
            "End-to-end time of a chat completion (received to answered)", secs);
  m.declare("vispco_batch_size", "histogram", "Requests per prefill batch",
            {1, 2, 3, 4, 6, 8, 12, 16, 32, 64});
  m.declare("vispco_decode_batch_rows", "histogram", "Rows sampled together at each decode step",
            {1, 2, 3, 4, 6, 8, 12, 16, 32, 64});
  m.declare("vispco_prompt_tokens_total", "counter", "Prompt tokens (text + visual before pruning)");
  m.declare("vispco_visual_tokens_total", "counter", "Visual tokens before pruning");
  m.declare("vispco_kept_visual_tokens_total", "counter", "Visual tokens kept after the last pruning stage");
  m.declare("vispco_generated_tokens_total", "counter", "Generated tokens");
  m.declare("vispco_queue_depth", "gauge", "Requests waiting for a batch");
  m.declare("vispco_kv_cache_bytes", "gauge", "KV-cache bytes of the decode batch after its last step");
  m.declare("vispco_resident_memory_bytes", "gauge", "Resident set size of the server process");
  declare_cost_metrics(m);
  declare_image_cache_metrics(m);
  m.declare("vispco_shadow_requests_total", "counter", "Requests drawn for a shadow run, by plan");
  m.declare("vispco_shadow_samples_total", "counter",
            "Shadow comparisons recorded (pruned answer vs the unpruned rerun), by plan");
  m.declare("vispco_shadow_agreements_total", "counter",
            "Shadow comparisons whose answers matched exactly, by plan");
  m.declare("vispco_shadow_agreement_lower_bound", "gauge",
            "Wilson score lower bound of the agreement rate at normal quantile z (1.96: two-sided 95 %), by "
            "plan");
  m.declare("vispco_shadow_agreement_upper_bound", "gauge",
            "Wilson score upper bound of the agreement rate at z, by plan (the guard's test)");
  m.declare("vispco_shadow_lost_total", "counter",
            "Shadow runs dropped (background queue full, shutting down) or failed, by plan");
  m.declare("vispco_guard_trips_total", "counter",
            "Plans the guard took out of service (once per plan and process), by plan");
  m.declare(
      "vispco_guard_fallbacks_total", "counter",
      "Requests the guard moved off a tripped plan, by the plan they would have run and the one they ran");
}

BatchScheduler::BatchScheduler(VisionLanguageModel& model, std::string model_dir, SchedulerOptions opts,
                               Metrics* metrics)
    : model_(model), model_dir_(std::move(model_dir)), opts_(std::move(opts)), metrics_(metrics) {
  static_plans_.capacity = kMaxCachedPlans;
  auto_plans_.capacity = kMaxAutoPlans;
  opts_.validate();
  opts_.default_plan = resolve_plan(opts_.default_plan);
  batch_ = std::make_unique<DecodeBatch>(model_);
  image_cache_ = std::make_unique<ImageCache>(opts_.image_cache_bytes, metrics_);
  model_key_ = opts_.model_key;
  if (model_key_.empty() && image_cache_->enabled()) {
    try {
      model_key_ = eval::model_folder_hash(model_dir_);
    } catch (const Error&) {
      model_key_ = "dir:" + model_dir_;
    }
  }
  worker_ = std::thread([this] { worker(); });
}

BatchScheduler::~BatchScheduler() { drain_and_stop(); }

const BoundPlan* BatchScheduler::PlanCache::find(const std::string& key) const {
  const auto it = plans.find(key);
  return it == plans.end() ? nullptr : &it->second;
}

const BoundPlan& BatchScheduler::PlanCache::insert(const std::string& key, BoundPlan plan) {
  if (const auto* b = find(key)) return *b;  // bound meanwhile by another thread: keep the first
  if (plans.size() >= capacity) {
    plans.erase(order.front());
    order.pop_front();
  }
  order.push_back(key);
  return plans.emplace(key, std::move(plan)).first->second;
}

BoundPlan BatchScheduler::bound_plan(const std::string& plan) const {
  const std::string text = plan.empty() ? opts_.default_plan : plan;
  // Parsing alone gives the cache key ("keep=0064"-style spellings share one entry); binding reads files.
  const std::string canonical = canonical_plan_text(text, model_.shape());
  const bool is_auto = is_auto_keep(canonical);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto* b = (is_auto ? auto_plans_ : static_plans_).find(canonical)) return *b;
  }
  BoundPlan bound = BoundPlan::bind(canonical, model_.shape(), ScorerEnv{model_dir_});  // lock released
  std::lock_guard<std::mutex> lock(mu_);
  return (is_auto ? auto_plans_ : static_plans_).insert(canonical, std::move(bound));
}

std::string BatchScheduler::resolve_plan(const std::string& plan) const { return bound_plan(plan).text(); }

void BatchScheduler::check_admission() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_ || !accepting_) throw ApiError(503, "the server is shutting down", "server_error");
  if (static_cast<int64_t>(queue_.size()) >= opts_.max_queue)
    throw ApiError(503,
                   "the request queue is full (" + std::to_string(opts_.max_queue) + " waiting); retry later",
                   "server_error");
}

std::future<JobResult> BatchScheduler::submit(GenerationJob job) {
  check_admission();  // before resolving the plan: a refusal costs nothing
  auto p = std::make_unique<Pending>();
  try {
    const BoundPlan bound = bound_plan(job.plan);
    p->plan_key = bound.text();
    if (bound.is_auto()) {
      p->auto_plan = bound;
      p->auto_pending = true;
    } else {
      p->plan = bound;
    }
  } catch (const Error& e) {
    throw bad_request(std::string("vispco.plan: ") + e.what(), "vispco");
  }
  p->job = std::move(job);
  auto fut = p->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || !accepting_) throw ApiError(503, "the server is shutting down", "server_error");
    if (static_cast<int64_t>(queue_.size()) >= opts_.max_queue)
      throw ApiError(
          503, "the request queue is full (" + std::to_string(opts_.max_queue) + " waiting); retry later",
          "server_error");
    p->enqueued = Clock::now();
    queue_.push_back(std::move(p));
    if (metrics_ != nullptr) metrics_->set("vispco_queue_depth", static_cast<double>(queue_.size()));
  }
  cv_.notify_all();
  return fut;
}

bool BatchScheduler::submit_background(GenerationJob job) {
  auto p = std::make_unique<Pending>();
  try {
    p->plan = bound_plan(job.plan);
  } catch (const Error&) {
    return false;
  }
  if (p->plan.is_auto()) return false;  // background runs are static plans (the unpruned one)
  p->plan_key = p->plan.text();
  p->job = std::move(job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || static_cast<int64_t>(background_.size()) >= opts_.max_background_queue) return false;
    p->enqueued = Clock::now();
    background_.push_back(std::move(p));
  }
  cv_.notify_all();
  return true;
}

void BatchScheduler::stop_accepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

void BatchScheduler::wait_idle(bool background) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock,
                [&] { return queue_.empty() && running_ == 0 && (!background || background_.empty()); });
}

void BatchScheduler::drain_and_stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    accepting_ = false;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

size_t BatchScheduler::cached_plan_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_plans_.plans.size() + auto_plans_.plans.size();
}

size_t BatchScheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::vector<std::unique_ptr<BatchScheduler::Pending>> BatchScheduler::take_plan(const std::string& key,
                                                                                int64_t n) {
  auto group = take_from(queue_, key, n);
  if (metrics_ != nullptr) metrics_->set("vispco_queue_depth", static_cast<double>(queue_.size()));
  return group;
}

std::vector<std::unique_ptr<BatchScheduler::Pending>> BatchScheduler::take_background(const std::string& key,
                                                                                      int64_t n) {
  return take_from(background_, key, n);
}

std::vector<std::unique_ptr<BatchScheduler::Pending>> BatchScheduler::take_from(
    std::deque<std::unique_ptr<Pending>>& queue, const std::string& key, int64_t n) {
  std::vector<std::unique_ptr<Pending>> group;
  int64_t tokens = 0;
  for (auto it = queue.begin(); it != queue.end() && static_cast<int64_t>(group.size()) < n;) {
    if ((*it)->plan_key == key) {
      tokens += prompt_tokens(**it);
      if (!group.empty() && opts_.max_prefill_tokens > 0 && tokens > opts_.max_prefill_tokens) break;
      group.push_back(std::move(*it));
      it = queue.erase(it);
    } else {
      ++it;
    }
  }
  return group;
}

int64_t BatchScheduler::prompt_tokens(const Pending& p) const {
  return static_cast<int64_t>(p.job.request.prompt_ids.size()) - 1 + model_.shape().n_visual_tokens;
}

void BatchScheduler::worker() {
  // The worker is the compute thread: its intra-op pool takes the count apply_threads set (--threads, or the
  // fitted default of core/cpu_quota.h). OpenMP's thread count is per calling thread and a new thread starts
  // from libgomp's own default (every CPU of the affinity mask), so set it here before the first kernel.
  at::init_num_threads();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::vector<std::unique_ptr<Pending>> group;
    if (batch_->empty()) {  // form a new batch from the oldest request's plan
      cv_.wait(lock, [&] { return draining_ || !queue_.empty() || !background_.empty(); });
      if (queue_.empty() && draining_) {  // draining and no request left: background work is dropped
        for (auto& p : background_) {
          JobResult r;
          r.error = "dropped: the server is shutting down";
          deliver(p->promise, std::move(r), p->job);  // its on_result counts it as lost
        }
        background_.clear();
        idle_cv_.notify_all();
        return;
      }
      if (queue_.empty()) {  // no request waits: background work may start
        batch_plan_ = background_.front()->plan_key;
        group = take_background(batch_plan_, opts_.max_batch);
      } else {
        resolve_auto_keep(lock);
        if (queue_.empty()) {  // every waiting job failed its K prediction
          idle_cv_.notify_all();
          continue;
        }
        if (queue_.front()->auto_pending) continue;  // arrived during the resolve: resolve it first
        batch_plan_ = queue_.front()->plan_key;
        const auto deadline =
            queue_.front()->enqueued + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double, std::milli>(opts_.batch_window_ms));
        const auto same_plan = [&] {
          int64_t n = 0;
          for (const auto& p : queue_) n += p->plan_key == batch_plan_;
          return n;
        };
        // Wait for as many as one prefill takes (fewer when the token budget holds fewer of this size).
        int64_t want = opts_.max_batch;
        if (opts_.max_prefill_tokens > 0)
          want =
              std::min(want, std::max<int64_t>(1, opts_.max_prefill_tokens / prompt_tokens(*queue_.front())));
        while (!draining_ && same_plan() < want && Clock::now() < deadline) cv_.wait_until(lock, deadline);
        group = take_plan(batch_plan_, opts_.max_batch);
      }
    } else if (opts_.continuous && !queue_.empty() && batch_->rows() < opts_.max_batch) {
      // Admit newcomers between decode steps while the oldest waiting request has the batch's plan (so a
      // request of another plan waits only for this batch to drain).
      resolve_auto_keep(lock);
      if (!queue_.empty() && queue_.front()->plan_key == batch_plan_)
        group = take_plan(batch_plan_, opts_.max_batch - batch_->rows());
    } else if (opts_.continuous && queue_.empty() && !background_.empty() &&
               batch_->rows() < opts_.max_batch) {
      // Background work joins a running batch of its plan only while no request waits.
      group = take_background(batch_plan_, opts_.max_batch - batch_->rows());
    }
    running_ = batch_->rows() + static_cast<int64_t>(group.size());
    lock.unlock();
    try {
      if (!group.empty()) admit(group);
      if (!batch_->empty()) decode_step();
    } catch (...) {  // both answer their own failures; anything else must not end the worker
      for (auto& p : group)
        if (p) {
          JobResult r;
          r.error = "internal error while batching";
          deliver(p->promise, std::move(r), p->job);
        }
      fail_all("internal error while batching");
    }
    lock.lock();
    running_ = batch_->rows();
    if (running_ == 0) idle_cv_.notify_all();
  }
}

void BatchScheduler::resolve_auto_keep(std::unique_lock<std::mutex>& lock) {
  std::vector<Pending*> todo;
  for (const auto& p : queue_)
    if (p->auto_pending) todo.push_back(p.get());  // Pending objects stay put: only this thread erases
  if (todo.empty()) return;
  lock.unlock();
  std::map<Pending*, std::string> failed;
  try {
    c10::InferenceMode guard;
    std::vector<at::Tensor> px;
    std::vector<std::string> questions;
    for (auto* p : todo) {
      px.push_back(p->job.request.pixels);
      questions.push_back(p->job.question);
    }
    const auto vt = model_.encode_image_list(px, true);  // images may differ in N_v
    const auto features = k_features(model_, vt, questions);
    for (size_t i = 0; i < todo.size(); ++i) {
      // The batch's generate() re-uses this tower output instead of running the tower again.
      todo[i]->job.request =
          with_visual_row(todo[i]->job.request, vt, static_cast<int64_t>(i), model_.shape());
      const BoundPlan& a = todo[i]->auto_plan;
      const int64_t k = a.predict_keep(features.slice(0, i, i + 1)).at(0);
      todo[i]->plan = a.at_keep(k);  // bound when the plan was (every rung); N_v runs unpruned
      todo[i]->plan_key = todo[i]->plan.text();
    }
  } catch (const std::exception& e) {
    for (auto* p : todo) failed[p] = std::string("keep=auto: ") + e.what();
  }
  lock.lock();
  for (auto* p : todo) p->auto_pending = false;
  if (failed.empty()) return;
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto f = failed.find(it->get());
    if (f == failed.end()) {
      ++it;
      continue;
    }
    JobResult r;
    r.error = f->second;
    deliver((*it)->promise, std::move(r), (*it)->job);
    it = queue_.erase(it);
  }
}

// A job in the decode batch.
struct BatchScheduler::Active {
  std::unique_ptr<Pending> p;
  TextStream stream;
  bool gone = false;   // a streaming client went away
  bool first = false;  // its first token has been sampled
  JobResult r;         // filled as it runs
};

void BatchScheduler::admit(std::vector<std::unique_ptr<Pending>>& group) {
  const auto start = Clock::now();
  const ModelShape& shape = model_.shape();
  const auto decode = [this](const std::vector<int64_t>& ids) { return model_.tokenizer().decode(ids); };
  std::vector<std::unique_ptr<Active>> joining;
  std::vector<VlmRequest> reqs;
  std::vector<GenerationConfig> configs;
  std::vector<int64_t> top_logprobs;
  std::vector<int64_t> ids;
  for (auto& p : group) {
    reqs.push_back(p->job.request);
    configs.push_back(p->job.gen);
    top_logprobs.push_back(p->job.top_logprobs);
    ids.push_back(next_row_id_++);
    TextStream stream(decode, p->job.stop);
    joining.push_back(std::make_unique<Active>(Active{std::move(p), std::move(stream)}));
  }
  group.clear();
  GenerationStats st;
  std::string plan;
  std::vector<std::vector<int64_t>> row_tokens;  // each row's decoder tokens per layer (FLOPs)
  bool cached = false;
  try {
    const BoundPlan& bound = joining[0]->p->plan;  // bound once per canonical plan: no file read here
    plan = bound.text();
    const bool hashed = std::all_of(joining.begin(), joining.end(),
                                    [](const auto& a) { return !a->p->job.image_sha256.empty(); });
    cached = image_cache_->enabled() && hashed && image_cacheable(bound);  // from the bound scorers
    if (cached) {  // sets each row's own prefill_ms (hits do not pay for the misses' prefixes)
      st = admit_cached(joining, bound, reqs, configs, ids, top_logprobs, row_tokens);
    } else {
      const auto hook = bound.hook(0);
      st = batch_->add(reqs, configs, ids, hook.get(), std::vector<bool>(reqs.size(), false), top_logprobs);
      for (const auto& a : joining)
        row_tokens.push_back(
            row_tokens_of(st, static_cast<int64_t>(a->p->job.request.prompt_ids.size()) - 1));
    }
  } catch (const std::exception& e) {  // the running batch is unchanged (DecodeBatch::add)
    for (auto& a : joining) {
      a->r.error = e.what();
      deliver(a->p->promise, std::move(a->r), a->p->job);
    }
    return;
  }
  for (size_t i = 0; i < joining.size(); ++i) {
    auto& r = joining[i]->r;
    const auto n_text = static_cast<int64_t>(joining[i]->p->job.request.prompt_ids.size()) - 1;
    r.plan = plan;
    r.n_visual = st.row_n_visual.at(i);  // this request's own image (a batch may mix sizes)
    r.n_visual_kept = st.row_n_visual_kept.at(i);
    r.prompt_tokens = n_text + r.n_visual;
    try {  // the rows are in the batch now: a failure here must not lose them
      row_flops(shape, row_tokens.at(i), n_text, r);
    } catch (const std::exception&) {
      r.prefill_flops_ratio = std::nan("");
    }
    r.queue_ms = ms_between(joining[i]->p->enqueued, start);
    if (!cached) r.prefill_ms = st.prefill_ms;  // the group's prefill, every row's
    r.batch_size = static_cast<int64_t>(joining.size());
    active_[ids[i]] = std::move(joining[i]);
  }
  if (metrics_ != nullptr) metrics_->observe("vispco_batch_size", static_cast<double>(ids.size()));
}

GenerationStats BatchScheduler::admit_cached(std::vector<std::unique_ptr<Active>>& joining,
                                             const BoundPlan& bound, const std::vector<VlmRequest>& reqs,
                                             const std::vector<GenerationConfig>& configs,
                                             const std::vector<int64_t>& ids,
                                             const std::vector<int64_t>& top_logprobs,
                                             std::vector<std::vector<int64_t>>& row_tokens) {
  const auto& ctx = model_.context();
  const int64_t image_id = model_.shape().image_token_id;
  const size_t n = reqs.size();
  std::vector<std::shared_ptr<const ImagePrefix>> held(n);  // alive until the rows have joined
  std::vector<std::string> keys(n), outcome(n);
  std::map<std::string, size_t> first;  // key → the first row of this group with it
  std::vector<size_t> misses;           // rows whose prefix is made now (one per key)
  for (size_t i = 0; i < n; ++i) {
    const auto& pids = reqs[i].prompt_ids;
    const auto img = std::find(pids.begin(), pids.end(), image_id);
    keys[i] =
        ImageCacheKey{
            model_key_,  std::string(c10::toString(ctx.dtype)), ctx.device.str(),
            bound.key(), joining[i]->p->job.image_sha256,       std::vector<int64_t>(pids.begin(), img)}
            .str();
    if (first.count(keys[i]) > 0) continue;  // the same prefix as an earlier row: made or found once
    first[keys[i]] = i;
    held[i] = image_cache_->find(keys[i]);
    if (held[i] != nullptr) {
      outcome[i] = "hit";
    } else {
      outcome[i] = "miss";
      misses.push_back(i);
    }
  }
  // The misses together, as the uncached path prefills a group: one tower pass, one prefix prefill per
  // layout.
  double made_ms = 0, vision_ms = 0;
  if (!misses.empty()) {
    std::vector<VlmRequest> todo;
    for (const auto i : misses) todo.push_back(reqs[i]);
    const auto hook = bound.hook(0);
    Stopwatch making;
    auto made = batch_->prefill_image_prefixes(todo, hook.get());
    vision_ms = made.at(0).vision_ms;   // one tower pass for all
    made_ms = making.ms() - vision_ms;  // every layout's prefix prefill
    for (size_t j = 0; j < misses.size(); ++j) {
      auto pre = std::make_shared<const ImagePrefix>(std::move(made[j]));
      image_cache_->insert(keys[misses[j]], pre);
      held[misses[j]] = std::move(pre);
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (held[i] == nullptr) {  // a later row with an earlier row's prefix
      const size_t f = first.at(keys[i]);
      held[i] = held[f];
      outcome[i] = "hit";
      image_cache_->find(keys[i]);  // counted as the hit it is (a prefix too large to store counts a miss)
    }
  std::vector<const ImagePrefix*> prefixes;
  for (const auto& h : held) prefixes.push_back(h.get());
  auto st =
      batch_->add_after_prefixes(prefixes, reqs, configs, ids, std::vector<bool>(n, false), top_logprobs);
  const double tail_ms = st.prefill_ms;
  st.prefill_ms += made_ms;
  st.vision_ms = vision_ms;
  for (size_t i = 0; i < n; ++i) {
    joining[i]->r.image_cache = outcome[i];
    // This row's own prefill: the text after the image, plus, for a miss, the pass that made its prefix.
    joining[i]->r.prefill_ms = tail_ms + (outcome[i] == "miss" ? held[i]->prefill_ms : 0.0);
    const int64_t tail = static_cast<int64_t>(reqs[i].prompt_ids.size()) - 1 - held[i]->n_prefix;
    std::vector<int64_t> row = held[i]->tokens_per_layer;
    for (auto& t : row) t += tail;
    row_tokens.push_back(std::move(row));
  }
  return st;
}

void BatchScheduler::decode_step() {
  const int64_t rows = batch_->rows();
  for (auto& [id, a] : active_) a->r.decode_batch_size = std::max(a->r.decode_batch_size, rows);
  const RowTokenCallback on_token = [&](int64_t id, int64_t token) {
    const auto it = active_.find(id);
    if (it == active_.end()) return false;
    auto& a = *it->second;
    try {  // a failure here ends this row only, with its error
      const bool go_on = a.stream.push(token);
      const auto& cb = a.p->job.on_delta;
      if (cb && !a.gone) {
        const auto d = a.stream.take_delta();
        if (!d.empty() && !cb(d)) a.gone = true;
      }
      const auto& cancelled = a.p->job.cancelled;
      return go_on && !a.gone && !(cancelled && cancelled->load());
    } catch (const std::exception& e) {
      a.r.error = std::string("streaming the answer failed: ") + e.what();
      return false;
    }
  };
  try {
    auto finished = batch_->sample(on_token);
    const auto now = Clock::now();
    for (auto& [id, a] : active_)
      if (!a->first) {
        a->first = true;
        a->r.ttft_ms = ms_between(a->p->enqueued, now);
      }
    for (auto& f : finished) {
      auto node = active_.extract(f.id);  // out of active_ before it is answered: answered once
      if (node.empty()) continue;
      if (!f.error.empty()) node.mapped()->r.error = f.error;  // this row alone failed
      answer(*node.mapped(), std::move(f.tokens), f.finish_reason, f.step_logprobs);
    }
    batch_->advance();
    if (metrics_ != nullptr) {
      metrics_->observe("vispco_decode_batch_rows", static_cast<double>(rows));
      metrics_->set("vispco_kv_cache_bytes", static_cast<double>(batch_->kv_cache_bytes()));
    }
  } catch (const std::exception& e) {
    fail_all(e.what());
  }
}

void BatchScheduler::fail_all(const std::string& error) {
  for (auto& [id, a] : active_) {
    a->r.error = error;
    deliver(a->p->promise, std::move(a->r), a->p->job);
  }
  active_.clear();
  batch_ = std::make_unique<DecodeBatch>(model_);
}

void BatchScheduler::answer(Active& a, std::vector<int64_t> tokens, const std::string& finish_reason,
                            const std::vector<StepLogprobs>& step_logprobs) {
  auto& r = a.r;
  const auto& job = a.p->job;
  if (!r.error.empty()) {  // its token callback failed
    deliver(a.p->promise, std::move(r), job);
    return;
  }
  try {
    const std::string rest = a.stream.finish();
    if (job.on_delta && !a.gone && !rest.empty()) job.on_delta(rest);
    r.text = a.stream.text();
    r.tokens = std::move(tokens);
    r.finish_reason = a.stream.stopped() ? "stop" : finish_reason;
    if (job.top_logprobs >= 0) {
      std::vector<PositionLogprobs> positions;
      for (const auto& s : step_logprobs) positions.push_back(with_pieces(s, model_.tokenizer()));
      r.logprobs = to_openai_json(positions);
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  const bool background = static_cast<bool>(job.on_result);  // a shadow run: not a request
  const bool cancelled = a.gone || (job.cancelled && job.cancelled->load());
  if (r.error.empty() && !background && !cancelled && job.on_answered) {
    try {
      job.on_answered(job, r);
    } catch (...) {  // the monitor's work only: the answer goes out regardless
    }
  }
  if (metrics_ != nullptr && r.error.empty() && !background) {
    record_prefill_cost(*metrics_, r.plan, r.prefill_flops, r.prefill_flops_unpruned, opts_.price_per_pflop,
                        false);
    metrics_->set("vispco_resident_memory_bytes", static_cast<double>(current_rss_bytes()));
    metrics_->observe("vispco_queue_wait_seconds", r.queue_ms / 1000.0);
    metrics_->observe("vispco_ttft_seconds", r.ttft_ms / 1000.0);
    metrics_->observe("vispco_prefill_seconds", r.prefill_ms / 1000.0);
    metrics_->add("vispco_prompt_tokens_total", static_cast<double>(r.prompt_tokens));
    metrics_->add("vispco_visual_tokens_total", static_cast<double>(r.n_visual));
    metrics_->add("vispco_kept_visual_tokens_total", static_cast<double>(r.n_visual_kept));
    metrics_->add("vispco_generated_tokens_total", static_cast<double>(r.tokens.size()));
  }
  deliver(a.p->promise, std::move(r), job);
}

}  // namespace vispco::serve
