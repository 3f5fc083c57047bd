// The shared evaluation loop (eval/distributed/shared_eval.h). Keys of one sweep, under its prefix: plan
// (rank 0's run key and the items' sample indices), the work queue's keys (work_queue.h), final (every
// selected sample's result, for the report of each rank).
#include "eval/distributed/shared_eval.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/errors.h"
#include "cost/timer.h"
#include "eval/distributed/work_queue.h"
#include "eval/evaluator_steps.h"
#include "prune/plan_hook.h"

namespace vispco::eval {
namespace {

nlohmann::json result_json(const SampleResult& r) {
  return {{"id", r.sample_id},          {"prediction", r.prediction},
          {"score", r.score},           {"correct", r.correct},
          {"prefill_ms", r.prefill_ms}, {"decode_ms", r.decode_ms},
          {"total_ms", r.total_ms},     {"extra", r.extra}};
}

SampleResult result_from_json(const nlohmann::json& j) {
  SampleResult r;
  r.sample_id = j.at("id").get<std::string>();
  r.prediction = j.at("prediction").get<std::string>();
  r.score = j.at("score").get<double>();
  r.correct = j.at("correct").get<bool>();
  r.prefill_ms = j.at("prefill_ms").get<double>();
  r.decode_ms = j.at("decode_ms").get<double>();
  r.total_ms = j.at("total_ms").get<double>();
  r.extra = j.at("extra");
  return r;
}

// Compact JSON that survives any prediction text (invalid UTF-8 replaced, as the report writers do).
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void pause(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

}  // namespace

void SharingOptions::validate() const {
  if (world_size < 1)
    throw InvalidArgument("sharing: world size must be ≥ 1, got " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    throw InvalidArgument("sharing: rank must be in [0, " + std::to_string(world_size) + "), got " +
                          std::to_string(rank));
  if (chunk < 1) throw InvalidArgument("sharing: --chunk must be ≥ 1 sample, got 0");
  if (!(lease_timeout_s > 0))
    throw InvalidArgument("sharing: --lease-timeout must be > 0 s, got " + std::to_string(lease_timeout_s));
  if (!(wait_timeout_s > 0))
    throw InvalidArgument("sharing: the wait timeout must be > 0 s, got " + std::to_string(wait_timeout_s));
  if (!(poll_s > 0))
    throw InvalidArgument("sharing: the poll interval must be > 0 s, got " + std::to_string(poll_s));
  if (exit_after_items < -1)
    throw InvalidArgument("sharing: exit_after_items must be ≥ −1, got " + std::to_string(exit_after_items));
}

WorkSharing::WorkSharing(KvStore& store, SharingOptions options) : store_(store), options_(options) {
  options_.validate();
}

std::string WorkSharing::log_prefix() const {
  return "[rank " + std::to_string(options_.rank) + "/" + std::to_string(options_.world_size) + "] ";
}

std::string WorkSharing::next_prefix() { return "vispco/" + std::to_string(n_sweeps_++) + "/"; }

std::string WorkSharing::wait_for(const std::string& key, const std::string& what) {
  Stopwatch waited;
  for (;;) {
    if (auto v = store_.get(key)) return *v;
    if (waited.ms() > options_.wait_timeout_s * 1000.0)
      throw Error(log_prefix() + "rank 0 did not publish " + what + " within " +
                  std::to_string(static_cast<int64_t>(options_.wait_timeout_s)) +
                  " s (is rank 0 still running? it holds the store)");
    pause(options_.poll_s);
  }
}

std::string WorkSharing::broadcast(const std::string& value) {
  const std::string key = "vispco/broadcast/" + std::to_string(n_broadcasts_++);
  if (is_main()) {
    store_.set(key, value);
    return value;
  }
  return wait_for(key, "a shared value");
}

void WorkSharing::finish() {
  if (options_.world_size == 1) return;
  if (!is_main()) {
    store_.add("vispco/left", 1);
    return;
  }
  Stopwatch waited;
  while (store_.add("vispco/left", 0) < options_.world_size - 1 &&
         waited.ms() < options_.lease_timeout_s * 1000.0)
    pause(options_.poll_s);
}

void WorkSharing::retire(const std::string& prefix) {
  // Earlier sweeps' values go once every other rank has said it read them (a rank that died never does: its
  // sweeps' values stay, a few hundred bytes a sample).
  std::vector<std::string> kept;
  for (const std::string& p : published_) {
    if (store_.add(p + "read", 0) >= options_.world_size - 1) {
      store_.erase(p + "final");
      store_.erase(p + "plan");
    } else {
      kept.push_back(p);
    }
  }
  kept.push_back(prefix);
  published_ = std::move(kept);
}

void WorkSharing::read_final(const std::string& prefix) { store_.add(prefix + "read", 1); }

EvalReport evaluate_shared(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                           const EvalOptions& options, PrefillHook* hook, WorkSharing& sharing) {
  const SharingOptions& so = sharing.options();
  if (so.world_size == 1) return evaluate(model, model_hash, dataset, options, hook);
  options.validate();
  Stopwatch wall;
  KvStore& kv = sharing.store();
  const std::string prefix = sharing.next_prefix();
  const bool main = sharing.is_main();
  EvalReport rep;
  rep.key = detail::eval_run_key(model, model_hash, dataset, options, hook);
  rep.n_dataset = dataset.samples.size();
  const std::vector<size_t> selected = detail::select_samples(dataset, options);
  rep.n_selected = selected.size();
  detail::SampleRunner runner(model, dataset, options, hook);

  // Rank 0: what is missing from the store, in items of `chunk` samples, published for the others.
  std::unique_ptr<ResultStore> store;
  std::vector<std::vector<size_t>> items;
  if (main) {
    std::set<std::string> done;
    if (!options.store_path.empty()) {
      store = detail::open_store(options.store_path);
      rep.store_path = options.store_path;
      done = store->done_ids(rep.key);
    }
    std::vector<size_t> todo;
    for (size_t i : selected)
      if (!done.count(dataset.samples[i].id)) todo.push_back(i);
    // Items of whole batches, cut where the single-process loop cuts its batches: a scorer whose draws depend
    // on a sample's place in its batch (random) then sees the same batches as in one process.
    const size_t chunk = (so.chunk + options.batch_size - 1) / options.batch_size * options.batch_size;
    for (size_t s = 0; s < todo.size(); s += chunk)
      items.emplace_back(todo.begin() + s, todo.begin() + std::min(todo.size(), s + chunk));
    kv.set(prefix + "plan", dump({{"key", rep.key.to_string()}, {"items", items}}));
  } else {
    const auto plan = nlohmann::json::parse(sharing.wait_for(prefix + "plan", "the sweep's items"));
    if (plan.at("key").get<std::string>() != rep.key.to_string())
      throw Error(sharing.log_prefix() +
                  "this rank's run differs from rank 0's (same model files, data and " +
                  "flags on every host?): rank 0 " + plan.at("key").get<std::string>() + "; here " +
                  rep.key.to_string());
    items = plan.at("items").get<std::vector<std::vector<size_t>>>();
  }
  size_t n_todo = 0;
  for (const auto& it : items) n_todo += it.size();

  WorkQueue queue(kv, prefix, so.rank, static_cast<int64_t>(items.size()), so.lease_timeout_s);
  Progress progress(main ? n_todo : 0, sharing.log_prefix() + "eval (whole sweep)", options.progress);
  std::map<std::string, SampleResult> fresh;
  std::vector<std::pair<std::string, std::string>> skipped;
  size_t n_mine = 0, n_mine_samples = 0;
  for (;;) {
    if (main) {
      for (const auto& [item, payload] : queue.collect()) {
        const auto j = nlohmann::json::parse(payload);
        std::vector<SampleResult> results;
        for (const auto& r : j.at("results")) results.push_back(result_from_json(r));
        if (store && !results.empty()) store->put_many(rep.key, results);
        for (auto& r : results) fresh.emplace(r.sample_id, std::move(r));
        for (const auto& s : j.at("skipped")) skipped.emplace_back(s.at(0), s.at(1));
        progress.advance(items[static_cast<size_t>(item)].size());
      }
      if (queue.all_collected()) break;
    } else if (kv.get(prefix + "final")) {
      break;
    }
    const std::optional<int64_t> item = queue.lease();
    if (!item) {
      pause(so.poll_s);
      continue;
    }
    if (so.exit_after_items >= 0 && sharing.n_items_done() >= so.exit_after_items) {
      std::fprintf(stderr, "%stest hook: ending the process while holding the lease on item %lld\n",
                   sharing.log_prefix().c_str(), static_cast<long long>(*item));
      std::fflush(stderr);
      ::_exit(0);
    }
    std::vector<SampleResult> results;
    std::vector<std::pair<std::string, std::string>> item_skipped;
    const auto& samples = items[static_cast<size_t>(*item)];
    runner.run(samples, results, item_skipped);
    nlohmann::json payload = {{"results", nlohmann::json::array()}, {"skipped", item_skipped}};
    for (const auto& r : results) payload["results"].push_back(result_json(r));
    queue.complete(*item, dump(payload));
    sharing.item_done();
    ++n_mine;
    n_mine_samples += samples.size();
  }
  progress.finish();

  // Rank 0 publishes every selected sample's result; each rank builds the report from the same rows.
  std::map<std::string, SampleResult> stored;
  if (main) {
    if (store && selected.size() > n_todo)
      for (auto& r : store->results(rep.key)) stored.emplace(r.sample_id, std::move(r));
    nlohmann::json fin = {{"fresh", nlohmann::json::array()},
                          {"stored", nlohmann::json::array()},
                          {"skipped", skipped},
                          {"n_from_store", selected.size() - n_todo}};
    const std::set<std::string> wanted = [&] {
      std::set<std::string> ids;
      for (size_t i : selected) ids.insert(dataset.samples[i].id);
      return ids;
    }();
    for (const auto& [id, r] : fresh) fin["fresh"].push_back(result_json(r));
    for (const auto& [id, r] : stored)
      if (wanted.count(id) && !fresh.count(id)) fin["stored"].push_back(result_json(r));
    kv.set(prefix + "final", dump(fin));
    sharing.retire(prefix);
    rep.n_from_store = selected.size() - n_todo;
  } else {
    const auto fin = nlohmann::json::parse(sharing.wait_for(prefix + "final", "the sweep's results"));
    sharing.read_final(prefix);
    for (const auto& r : fin.at("fresh")) {
      SampleResult s = result_from_json(r);
      fresh.emplace(s.sample_id, std::move(s));
    }
    for (const auto& r : fin.at("stored")) {
      SampleResult s = result_from_json(r);
      stored.emplace(s.sample_id, std::move(s));
    }
    for (const auto& s : fin.at("skipped")) skipped.emplace_back(s.at(0), s.at(1));
    rep.n_from_store = fin.at("n_from_store").get<size_t>();
  }
  rep.n_evaluated = fresh.size();
  detail::add_skip_warnings(rep, skipped);
  detail::assemble_report(rep, dataset, options, runner, selected, fresh, stored);
  rep.wall_s = wall.ms() / 1000.0;
  rep.samples_per_s = rep.n_evaluated > 0 && rep.wall_s > 0 ? rep.n_evaluated / rep.wall_s : 0.0;
  if (options.progress != ProgressMode::kOff || !main) {
    std::fprintf(stderr,
                 "%seval: %zu of %zu items (%zu samples) generated here, %lld taken over from an "
                 "expired lease, %.1f s\n",
                 sharing.log_prefix().c_str(), n_mine, items.size(), n_mine_samples,
                 static_cast<long long>(queue.n_retaken()), rep.wall_s);
  }
  if (main && !options.out_dir.empty()) write_eval_outputs(rep, options, options.out_dir);
  return rep;
}

EvalReport evaluate_plan_shared(VisionLanguageModel& model, const std::string& model_hash,
                                const Dataset& dataset, EvalOptions options, const BoundPlan& plan,
                                WorkSharing& sharing, uint64_t seed) {
  options.plan = plan.key();
  const auto hook = plan.hook(seed);
  return evaluate_shared(model, model_hash, dataset, options, hook.get(), sharing);
}

}  // namespace vispco::eval
