// Batch scheduler: group waiting requests by plan, one generate() per batch (see scheduler.h).
#include "serve/scheduler.h"

#include <ATen/ATen.h>

#include "core/errors.h"
#include "cost/flops.h"
#include "cost/timer.h"
#include "model/logprobs.h"
#include "optimize/dynamic_k/auto_keep.h"
#include "optimize/dynamic_k/k_features.h"
#include "prune/plan_hook.h"
#include "serve/api_error.h"
#include "serve/text_stream.h"

namespace vispco::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Decoder prefill FLOPs of one row of a batch over its unpruned FLOPs. The batch's per-layer token counts
// include the row's left padding (T_max − T_row positions in every layer).
double row_flops_ratio(const LlavaConfig& cfg, const GenerationStats& st, int64_t n_text) {
  const int64_t pad = st.n_text_max - n_text;
  std::vector<int64_t> row = st.tokens_per_layer;
  for (auto& n : row) n -= pad;
  const double pruned = static_cast<double>(prefill_flops(cfg, row).decoder_total);
  const double full =
      static_cast<double>(prefill_flops(cfg, unpruned_tokens_per_layer(cfg, n_text)).decoder_total);
  return pruned / full;
}

}  // namespace

void SchedulerOptions::validate() const {
  if (max_batch < 1) throw InvalidArgument("max_batch must be ≥ 1, got " + std::to_string(max_batch));
  if (!(batch_window_ms >= 0))
    throw InvalidArgument("batch_window_ms must be ≥ 0, got " + std::to_string(batch_window_ms));
  if (max_queue < 1) throw InvalidArgument("max_queue must be ≥ 1, got " + std::to_string(max_queue));
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
  m.declare("vispco_prompt_tokens_total", "counter", "Prompt tokens (text + visual before pruning)");
  m.declare("vispco_visual_tokens_total", "counter", "Visual tokens before pruning");
  m.declare("vispco_kept_visual_tokens_total", "counter", "Visual tokens kept after the last pruning stage");
  m.declare("vispco_generated_tokens_total", "counter", "Generated tokens");
  m.declare("vispco_queue_depth", "gauge", "Requests waiting for a batch");
  m.declare("vispco_kv_cache_bytes", "gauge", "KV-cache bytes of the last batch (its peak)");
  m.declare("vispco_resident_memory_bytes", "gauge", "Resident set size of the server process");
}

BatchScheduler::BatchScheduler(VisionLanguageModel& model, std::string model_dir, SchedulerOptions opts,
                               Metrics* metrics)
    : model_(model), model_dir_(std::move(model_dir)), opts_(std::move(opts)), metrics_(metrics) {
  opts_.validate();
  opts_.default_plan = resolve_plan(opts_.default_plan);
  worker_ = std::thread([this] { worker(); });
}

BatchScheduler::~BatchScheduler() { drain_and_stop(); }

struct BatchScheduler::AutoPredictor {
  optimize::AutoKeepPlan plan;
  mutable optimize::KPredictor predictor{nullptr};  // predict() is not const (a torch module call)
};

const BatchScheduler::AutoPredictor& BatchScheduler::auto_predictor(const std::string& text) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = auto_predictors_.find(text); it != auto_predictors_.end()) return *it->second;
  }
  auto a = std::make_shared<AutoPredictor>();
  a->plan = optimize::parse_auto_keep(text, model_.config());
  a->predictor = optimize::load_plan_predictor(a->plan, model_dir_, model_.config());
  for (const auto k :
       a->predictor->meta.ladder)  // every rung binds (e.g. a gate file) before any request runs
    if (k < model_.config().n_visual_tokens())
      PlanHook(a->plan.at(k, model_.config()), model_.config(), 0, ScorerEnv{model_dir_});
  std::lock_guard<std::mutex> lock(mu_);
  return *auto_predictors_.emplace(text, a).first->second;
}

std::string BatchScheduler::resolve_plan(const std::string& plan) const {
  const std::string text = plan.empty() ? opts_.default_plan : plan;
  if (optimize::is_auto_keep(text)) return auto_predictor(text).plan.to_string();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (valid_plans_.count(text) > 0) return parse_plan(text, model_.config()).to_string();
  }
  PlanHook hook(parse_plan(text, model_.config()), model_.config(), 0,
                ScorerEnv{model_dir_});  // binds scorers
  std::lock_guard<std::mutex> lock(mu_);
  valid_plans_.insert(text);
  return hook.plan().to_string();
}

std::future<JobResult> BatchScheduler::submit(GenerationJob job) {
  auto p = std::make_unique<Pending>();
  try {
    p->plan_key = resolve_plan(job.plan);
    if (optimize::is_auto_keep(p->plan_key)) p->auto_text = p->plan_key;
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

void BatchScheduler::stop_accepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

void BatchScheduler::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
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

size_t BatchScheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void BatchScheduler::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return draining_ || !queue_.empty(); });
    if (queue_.empty()) {  // draining and nothing left
      idle_cv_.notify_all();
      return;
    }
    resolve_auto_keep(lock);
    if (queue_.empty()) continue;
    const std::string key = queue_.front()->plan_key;
    const auto deadline =
        queue_.front()->enqueued + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double, std::milli>(opts_.batch_window_ms));
    const auto same_key = [&] {
      int64_t n = 0;
      for (const auto& p : queue_) n += p->plan_key == key;
      return n;
    };
    while (!draining_ && same_key() < opts_.max_batch && Clock::now() < deadline)
      cv_.wait_until(lock, deadline);
    std::vector<std::unique_ptr<Pending>> batch;
    for (auto it = queue_.begin();
         it != queue_.end() && static_cast<int64_t>(batch.size()) < opts_.max_batch;) {
      if ((*it)->plan_key == key) {
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (metrics_ != nullptr) metrics_->set("vispco_queue_depth", static_cast<double>(queue_.size()));
    running_ = static_cast<int64_t>(batch.size());
    lock.unlock();
    run_batch(batch);
    lock.lock();
    running_ = 0;
    idle_cv_.notify_all();
  }
}

void BatchScheduler::resolve_auto_keep(std::unique_lock<std::mutex>& lock) {
  std::vector<Pending*> todo;
  for (const auto& p : queue_)
    if (!p->auto_text.empty()) todo.push_back(p.get());  // Pending objects stay put: only this thread erases
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
    const auto vt = model_.encode_images(at::stack(px), true);
    const auto features = optimize::k_features(model_, vt, questions);
    for (size_t i = 0; i < todo.size(); ++i) {
      // The batch's generate() re-uses this tower output instead of running the tower again.
      todo[i]->job.request.visual = {vt.embeds[static_cast<int64_t>(i)],
                                     vt.cls_attention[static_cast<int64_t>(i)],
                                     vt.keys[static_cast<int64_t>(i)]};
      const auto& a = auto_predictor(todo[i]->auto_text);
      const int rung = a.predictor->predict(features.slice(0, i, i + 1)).at(0);
      const int64_t k = a.predictor->meta.ladder.at(rung);
      todo[i]->plan_key = k >= model_.config().n_visual_tokens() ? std::string("none")
                                                                 : a.plan.at(k, model_.config()).to_string();
    }
  } catch (const std::exception& e) {
    for (auto* p : todo) failed[p] = std::string("keep=auto: ") + e.what();
  }
  lock.lock();
  for (auto* p : todo) p->auto_text.clear();
  if (failed.empty()) return;
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto f = failed.find(it->get());
    if (f == failed.end()) {
      ++it;
      continue;
    }
    JobResult r;
    r.error = f->second;
    (*it)->promise.set_value(std::move(r));
    if ((*it)->job.on_finish) (*it)->job.on_finish();
    it = queue_.erase(it);
  }
}

void BatchScheduler::run_batch(std::vector<std::unique_ptr<Pending>>& batch) {
  const auto start = Clock::now();
  std::vector<JobResult> results(batch.size());
  try {
    const auto& cfg = model_.config();
    PlanHook hook(parse_plan(batch[0]->plan_key, cfg), cfg, 0, ScorerEnv{model_dir_});
    std::vector<VlmRequest> reqs;
    std::vector<GenerationConfig> configs;
    std::vector<TextStream> streams;
    bool want_logits = false;
    const auto decode = [this](const std::vector<int64_t>& ids) { return model_.tokenizer().decode(ids); };
    for (const auto& p : batch) {
      reqs.push_back(p->job.request);
      configs.push_back(p->job.gen);
      streams.emplace_back(decode, p->job.stop);
      want_logits = want_logits || p->job.top_logprobs >= 0;
    }
    std::vector<bool> gone(batch.size(), false);
    const TokenCallback on_token = [&](size_t row, int64_t token) {
      const bool go_on = streams[row].push(token);
      const auto& cb = batch[row]->job.on_delta;
      if (cb && !gone[row]) {
        const auto d = streams[row].take_delta();
        if (!d.empty() && !cb(d)) gone[row] = true;
      }
      return go_on && !gone[row];
    };
    auto out = generate(model_, reqs, configs, hook.plan().empty() ? nullptr : &hook, want_logits, on_token);
    const auto& st = out.stats;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& r = results[i];
      const auto& job = batch[i]->job;
      const std::string rest = streams[i].finish();
      if (job.on_delta && !gone[i] && !rest.empty()) job.on_delta(rest);
      r.text = streams[i].text();
      r.tokens = out.tokens[i];
      r.finish_reason = streams[i].stopped() ? "stop" : out.finish_reasons[i];
      if (job.top_logprobs >= 0)
        r.logprobs = to_openai_json(token_logprobs(out.step_logits, static_cast<int64_t>(i), r.tokens,
                                                   job.top_logprobs, model_.tokenizer()));
      r.plan = hook.plan().to_string();
      const auto n_text = static_cast<int64_t>(job.request.prompt_ids.size()) - 1;
      r.prompt_tokens = n_text + st.n_visual;
      r.n_visual = st.n_visual;
      r.n_visual_kept = st.n_visual_kept;
      r.prefill_flops_ratio = row_flops_ratio(cfg, st, n_text);
      r.queue_ms = ms_between(batch[i]->enqueued, start);
      r.prefill_ms = st.prefill_ms;
      r.ttft_ms = r.queue_ms + st.ttft_ms;
      r.batch_size = static_cast<int64_t>(batch.size());
    }
    if (metrics_ != nullptr) {
      metrics_->observe("vispco_batch_size", static_cast<double>(batch.size()));
      metrics_->set("vispco_kv_cache_bytes", static_cast<double>(st.kv_cache_bytes));
      metrics_->set("vispco_resident_memory_bytes", static_cast<double>(current_rss_bytes()));
      for (const auto& r : results) {
        metrics_->observe("vispco_queue_wait_seconds", r.queue_ms / 1000.0);
        metrics_->observe("vispco_ttft_seconds", r.ttft_ms / 1000.0);
        metrics_->observe("vispco_prefill_seconds", r.prefill_ms / 1000.0);
        metrics_->add("vispco_prompt_tokens_total", static_cast<double>(r.prompt_tokens));
        metrics_->add("vispco_visual_tokens_total", static_cast<double>(r.n_visual));
        metrics_->add("vispco_kept_visual_tokens_total", static_cast<double>(r.n_visual_kept));
        metrics_->add("vispco_generated_tokens_total", static_cast<double>(r.tokens.size()));
      }
    }
  } catch (const std::exception& e) {
    for (auto& r : results) r.error = e.what();
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->promise.set_value(std::move(results[i]));
    if (batch[i]->job.on_finish) batch[i]->job.on_finish();
  }
}

}  // namespace vispco::serve
