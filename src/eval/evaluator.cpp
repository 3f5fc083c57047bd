// Evaluation loop: select samples (limit, shard), skip those in the store, generate greedily in batches,
// score, commit each batch, then summarise every selected sample from the store.
#include "eval/evaluator.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "core/errors.h"
#include "core/json_fields.h"
#include "cost/timer.h"
#include "eval/evaluator_steps.h"
#include "eval/run_key.h"
#include "io/image.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;

std::string policy_name(MissingImagePolicy p) { return p == MissingImagePolicy::kSkip ? "skip" : "stop"; }

double extra_number(const SampleResult& r, const char* key) {
  const auto it = r.extra.find(key);
  return it != r.extra.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Generates one batch and turns the outputs into store rows.
std::vector<SampleResult> run_batch(VisionLanguageModel& model, const std::vector<const Sample*>& batch,
                                    std::vector<VlmRequest> reqs, const GenerationConfig& gc,
                                    PrefillHook* hook) {
  Stopwatch wall;
  const GenerationOutput out = generate(model, reqs, gc, hook);
  sync_device(model.context().device);
  const double total_ms = wall.ms();
  const auto& st = out.stats;
  const double B = static_cast<double>(batch.size());
  std::vector<SampleResult> results;
  for (size_t b = 0; b < batch.size(); ++b) {
    const Sample& s = *batch[b];
    const SampleScore sc = score_answer(out.texts[b], s.answer, s.answers);
    SampleResult r;
    r.sample_id = s.id;
    r.prediction = out.texts[b];
    r.score = sc.score();
    r.correct = sc.exact > 0.5;
    r.prefill_ms = st.prefill_ms / B;
    r.decode_ms = st.decode_ms / B;
    r.total_ms = total_ms / B;
    r.extra = {{"ttft_ms", st.ttft_ms},
               {"vision_ms", st.vision_ms / B},
               {"prepass_ms", st.prepass_ms / B},
               {"batch", st.batch},
               {"n_visual", st.n_visual},
               {"n_visual_kept", st.n_visual_kept},
               {"n_text", static_cast<int64_t>(reqs[b].prompt_ids.size()) - 1},
               {"n_generated", static_cast<int64_t>(out.tokens[b].size())}};
    results.push_back(std::move(r));
  }
  return results;
}

// Per family and "all": the share of rows whose normalised answer is their family's most frequent one.
std::map<std::string, double> answer_priors(const std::vector<EvalRow>& rows) {
  std::map<std::string, std::map<std::string, size_t>> counts;
  std::map<std::string, size_t> n;
  for (const EvalRow& r : rows) ++counts[r.family][normalize_answer(r.answer)], ++n[r.family];
  std::map<std::string, double> prior;
  size_t best_all = 0;
  for (const auto& [family, c] : counts) {
    size_t best = 0;
    for (const auto& [answer, k] : c) best = std::max(best, k);
    prior[family] = static_cast<double>(best) / static_cast<double>(n[family]);
    best_all += best;
  }
  if (!rows.empty()) prior["all"] = static_cast<double>(best_all) / static_cast<double>(rows.size());
  return prior;
}

}  // namespace

std::vector<size_t> image_permutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  std::mt19937_64 rng(seed);
  for (size_t i = n; i > 1; --i) {  // Sattolo: j < i − 1, so every element moves
    std::uniform_int_distribution<size_t> pick(0, i - 2);
    std::swap(p[i - 1], p[pick(rng)]);
  }
  return p;
}

GenerationConfig default_eval_generation() {
  GenerationConfig gc;
  gc.max_new_tokens = 8;
  gc.temperature = 0.0;
  return gc;
}

void EvalOptions::validate() const {
  if (shard_count < 1) throw InvalidArgument("eval: shard count must be ≥ 1, got 0");
  if (shard_index >= shard_count)
    throw InvalidArgument("eval: shard index must be < shard count, got shard " +
                          std::to_string(shard_index) + "/" + std::to_string(shard_count) +
                          " (shards are numbered 0.." + std::to_string(shard_count - 1) + ")");
  if (batch_size < 1) throw InvalidArgument("eval: batch size must be ≥ 1, got 0");
  generation.validate();
  if (generation.temperature != 0.0)
    throw InvalidArgument("eval: decoding must be greedy (temperature 0), got temperature " +
                          std::to_string(generation.temperature));
}

namespace {

MissingImagePolicy parse_missing_image_policy(const std::string& p) {
  if (p != "stop" && p != "skip")
    throw InvalidArgument("eval options: on_missing_image must be \"stop\" or \"skip\", got \"" + p + "\"");
  return p == "skip" ? MissingImagePolicy::kSkip : MissingImagePolicy::kStop;
}

// shuffle_images: a seed, or null for "not shuffled".
std::optional<uint64_t> shuffle_seed_from(const nlohmann::json& v) {
  return v.is_null() ? std::nullopt : std::optional<uint64_t>(v.get<uint64_t>());
}
nlohmann::json shuffle_seed_json(const std::optional<uint64_t>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json();
}

}  // namespace

static const JsonFields<EvalOptions>& eval_fields() {
  using O = EvalOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<EvalOptions> fields("eval options", {
      {"limit", &O::limit}, {"shard_index", &O::shard_index}, {"shard_count", &O::shard_count},
      {"batch_size", &O::batch_size}, nested("generation", &O::generation, generation_config_from_json),
      {"plan", &O::plan}, {"store_path", &O::store_path}, {"out_dir", &O::out_dir},
      named("on_missing_image", &O::on_missing_image, parse_missing_image_policy, policy_name),
      named("progress", &O::progress, parse_progress_mode, progress_mode_name),
      converted("shuffle_images", &O::shuffle_images, shuffle_seed_from, shuffle_seed_json)});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const EvalOptions& o) { return eval_fields().write(o); }

EvalOptions eval_options_from_json(const nlohmann::json& j) { return eval_fields().read_valid(j); }

void summarise_rows(EvalReport& rep) {
  rep.metrics = {};
  rep.mean_prefill_ms = rep.mean_decode_ms = rep.mean_ttft_ms = rep.mean_n_visual = rep.mean_n_visual_kept =
      0;
  for (const auto& row : rep.rows) {
    rep.metrics.add(row.family, row.score);
    rep.mean_prefill_ms += row.result.prefill_ms;
    rep.mean_decode_ms += row.result.decode_ms;
    rep.mean_ttft_ms += extra_number(row.result, "ttft_ms");
    rep.mean_n_visual += extra_number(row.result, "n_visual");
    rep.mean_n_visual_kept += extra_number(row.result, "n_visual_kept");
  }
  if (!rep.rows.empty()) {
    const double n = static_cast<double>(rep.rows.size());
    for (double* m : {&rep.mean_prefill_ms, &rep.mean_decode_ms, &rep.mean_ttft_ms, &rep.mean_n_visual,
                      &rep.mean_n_visual_kept})
      *m /= n;
  }
  rep.answer_prior = answer_priors(rep.rows);
}

namespace detail {

std::vector<size_t> select_samples(const Dataset& ds, const EvalOptions& o) {
  const size_t n = o.limit == 0 ? ds.samples.size() : std::min(o.limit, ds.samples.size());
  std::vector<size_t> out;
  for (size_t i = o.shard_index; i < n; i += o.shard_count) out.push_back(i);
  return out;
}

RunKey eval_run_key(const VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                    const EvalOptions& options, const PrefillHook* hook) {
  const std::string dataset_key =
      options.shuffle_images ? dataset.hash + "+shuffle-images=" + std::to_string(*options.shuffle_images)
                             : dataset.hash;
  RunKey key{model_hash, dataset_key, canonical_plan(options.plan),
             decoding_key(options.generation, model.context().dtype)};
  if ((key.plan == "none") != (hook == nullptr))
    throw InvalidArgument(hook == nullptr
                              ? "eval: plan '" + key.plan + "' given without its pruning hook"
                              : "eval: a pruning hook was given but the plan is 'none'; name the plan so "
                                "its results are stored apart from the unpruned ones");
  return key;
}

SampleRunner::SampleRunner(VisionLanguageModel& model, const Dataset& dataset, const EvalOptions& options,
                           PrefillHook* hook)
    : model_(model), dataset_(dataset), options_(options), hook_(hook) {
  const size_t n_limited =
      options.limit == 0 ? dataset.samples.size() : std::min(options.limit, dataset.samples.size());
  if (options.shuffle_images) image_source_ = image_permutation(n_limited, *options.shuffle_images);
}

const Sample& SampleRunner::shown(size_t i) const {
  return dataset_.samples[options_.shuffle_images ? image_source_[i] : i];
}

void SampleRunner::run(const std::vector<size_t>& indices, std::vector<SampleResult>& results,
                       std::vector<std::pair<std::string, std::string>>& skipped,
                       const std::function<void(const std::vector<SampleResult>&, size_t)>& after_batch) {
  for (size_t start = 0; start < indices.size(); start += options_.batch_size) {
    const size_t end = std::min(indices.size(), start + options_.batch_size);
    std::vector<const Sample*> batch;
    std::vector<VlmRequest> reqs;
    for (size_t t = start; t < end; ++t) {
      const Sample& s = dataset_.samples[indices[t]];
      cv::Mat rgb;
      try {
        rgb = io::load_image_rgb(shown(indices[t]).image_path);
      } catch (const Error& e) {
        if (options_.on_missing_image == MissingImagePolicy::kStop) {
          const std::string msg = dataset_.jsonl_path + ":" + std::to_string(s.line) + ": sample '" + s.id +
                                  "': " + e.what() + " (skip such samples with --skip-missing)";
          if (dynamic_cast<const FormatError*>(&e) != nullptr) throw FormatError(msg);
          throw IoError(msg);
        }
        skipped.emplace_back(s.id, "sample '" + s.id + "' skipped: " + e.what());
        continue;
      }
      batch.push_back(&s);
      reqs.push_back({model_.preprocess(rgb), model_.prompt_ids(s.question)});
    }
    std::vector<SampleResult> fresh;
    if (!batch.empty()) fresh = run_batch(model_, batch, std::move(reqs), options_.generation, hook_);
    if (after_batch) after_batch(fresh, end - start);
    for (auto& r : fresh) results.push_back(std::move(r));
  }
}

void assemble_report(EvalReport& rep, const Dataset& dataset, const EvalOptions& options,
                     const SampleRunner& runner, const std::vector<size_t>& selected,
                     const std::map<std::string, SampleResult>& fresh,
                     const std::map<std::string, SampleResult>& stored) {
  for (size_t i : selected) {
    const Sample& s = dataset.samples[i];
    EvalRow row{s.id, s.family, s.question, s.answer, {}, {}, {}, false};
    if (options.shuffle_images) row.image_of = runner.shown(i).id;
    if (auto it = fresh.find(s.id); it != fresh.end()) {
      row.result = it->second;
    } else if (auto st = stored.find(s.id); st != stored.end()) {
      row.result = st->second;
      row.from_store = true;
    } else {
      continue;  // skipped image
    }
    row.score = score_answer(row.result.prediction, s.answer, s.answers);
    rep.rows.push_back(std::move(row));
  }
  summarise_rows(rep);
}

void add_skip_warnings(EvalReport& rep, const std::vector<std::pair<std::string, std::string>>& skipped) {
  std::set<std::string> ids;
  for (const auto& [id, warning] : skipped) {
    if (!ids.insert(id).second) continue;
    if (rep.warnings.size() < 20) rep.warnings.push_back(warning);
  }
  rep.n_skipped = ids.size();
  if (ids.size() > rep.warnings.size())
    rep.warnings.push_back("… and " + std::to_string(ids.size() - rep.warnings.size()) + " more skipped");
}

std::unique_ptr<ResultStore> open_store(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw IoError("eval: cannot create the store's folder '" + parent.string() + "': " + ec.message());
  return std::make_unique<ResultStore>(path);
}

}  // namespace detail

EvalReport evaluate(VisionLanguageModel& model, const std::string& model_hash, const Dataset& dataset,
                    const EvalOptions& options, PrefillHook* hook) {
  options.validate();
  Stopwatch wall;
  EvalReport rep;
  rep.key = detail::eval_run_key(model, model_hash, dataset, options, hook);
  rep.n_dataset = dataset.samples.size();
  const std::vector<size_t> selected = detail::select_samples(dataset, options);
  rep.n_selected = selected.size();
  detail::SampleRunner runner(model, dataset, options, hook);

  std::unique_ptr<ResultStore> store;
  std::set<std::string> done;
  if (!options.store_path.empty()) {
    store = detail::open_store(options.store_path);
    rep.store_path = options.store_path;
    done = store->done_ids(rep.key);
  }
  std::vector<size_t> todo;
  for (size_t i : selected)
    if (!done.count(dataset.samples[i].id)) todo.push_back(i);
  rep.n_from_store = selected.size() - todo.size();

  // Generate what is missing, one batch at a time; each batch is committed before the next starts.
  std::vector<SampleResult> results;
  std::vector<std::pair<std::string, std::string>> skipped;
  Progress progress(todo.size(), "eval", options.progress);
  runner.run(todo, results, skipped, [&](const std::vector<SampleResult>& batch, size_t n_tried) {
    if (store && !batch.empty()) store->put_many(rep.key, batch);
    progress.advance(n_tried);
  });
  progress.finish();
  std::map<std::string, SampleResult> fresh;
  for (auto& r : results) fresh.emplace(r.sample_id, std::move(r));
  rep.n_evaluated = fresh.size();
  detail::add_skip_warnings(rep, skipped);

  // Summarise every selected sample: this call's results, else the store's.
  std::map<std::string, SampleResult> stored;
  if (store && rep.n_from_store > 0)
    for (auto& r : store->results(rep.key)) stored.emplace(r.sample_id, std::move(r));
  detail::assemble_report(rep, dataset, options, runner, selected, fresh, stored);
  rep.wall_s = wall.ms() / 1000.0;
  rep.samples_per_s = rep.n_evaluated > 0 && rep.wall_s > 0 ? rep.n_evaluated / rep.wall_s : 0.0;
  if (!options.out_dir.empty()) write_eval_outputs(rep, options, options.out_dir);
  return rep;
}

}  // namespace vispco::eval
