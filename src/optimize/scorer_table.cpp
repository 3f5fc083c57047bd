// The scorer accuracy table: plan templates, evaluation of every cell through the result store, Markdown.
#include "optimize/scorer_table.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "cost/flops.h"
#include "eval/distributed/shared_eval.h"
#include "eval/interval.h"
#include "eval/plan_evaluation.h"
#include "eval/run_key.h"
#include "prune/gate.h"
#include "prune/scorer.h"

namespace vispco::optimize {
namespace {

// printf into a std::string (table cells).
std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* f, ...) {
  char b[128];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(b, sizeof b, f, ap);
  va_end(ap);
  return b;
}

// Visual tokens alive entering each layer under `plan`, plus n_text, for the FLOPs model.
std::vector<int64_t> plan_tokens_per_layer(const PruningPlan& plan, const ModelShape& shape, int64_t n_text) {
  std::vector<int64_t> out;
  int64_t alive = shape.n_visual_tokens;
  size_t next = 0;
  for (int64_t l = 0; l < shape.n_layers; ++l) {
    while (next < plan.stages.size() && plan.stages[next].layer == l) alive = plan.stages[next++].keep;
    out.push_back(n_text + alive);
  }
  return out;
}

}  // namespace

void ScorerTableOptions::validate() const {
  if (keeps.empty()) throw InvalidArgument("scorer table: no K given");
  for (auto k : keeps)
    if (k < 1) throw InvalidArgument("scorer table: K must be ≥ 1 (got " + std::to_string(k) + ")");
  if (llm_layer < 1)
    throw InvalidArgument("scorer table: the in-LLM layer must be ≥ 1 (got " + std::to_string(llm_layer) +
                          ")");
  for (const auto& s : scorers)
    if (s != "pdrop") make_scorer(s);  // throws listing the valid names
  eval.validate();
}

std::string scorer_table_plan(const std::string& scorer, int64_t keep, const ModelShape& shape,
                              int64_t llm_layer) {
  const std::string k = std::to_string(keep);
  if (scorer == "pdrop") {
    const int64_t L = shape.n_layers, n_v = shape.n_visual_tokens;
    std::string plan;
    int64_t prev_layer = 0;
    for (int i = 1; i <= 3; ++i) {
      const int64_t layer = std::max<int64_t>(prev_layer + 1, L * i / 4);
      const int64_t ki = i == 3 ? keep : std::llround(n_v * std::pow(double(keep) / n_v, i / 3.0));
      plan += (plan.empty() ? "" : "+") + std::string("fastv:layer=") + std::to_string(layer) +
              ",keep=" + std::to_string(ki);
      prev_layer = layer;
    }
    return plan;
  }
  const auto sc = make_scorer(scorer);  // throws for an unknown name
  if (scorer == "pool") {
    const int64_t side = std::max<int64_t>(1, static_cast<int64_t>(std::floor(std::sqrt(double(keep)))));
    return "pool:layer=0,keep=" + std::to_string(side * side);
  }
  const int64_t layer = sc->hook_point() == HookPoint::kInLlm ? llm_layer : 0;
  return scorer + ":layer=" + std::to_string(layer) + ",keep=" + k;
}

nlohmann::json ScorerTableCell::to_json() const {
  return {{"scorer", scorer},
          {"keep", keep},
          {"plan", plan},
          {"mean_kept", mean_kept},
          {"metrics", metrics.to_json()},
          {"flops_ratio", flops_ratio},
          {"mean_ttft_ms", mean_ttft_ms},
          {"mean_prepass_ms", mean_prepass_ms}};
}

nlohmann::json ScorerTable::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& c : cells) cs.push_back(c.to_json());
  return {{"model_dir", model_dir},
          {"model_hash", model_hash},
          {"dataset", dataset},
          {"dataset_hash", dataset_hash},
          {"n_samples", n_samples},
          {"batch", batch},
          {"n_visual", n_visual},
          {"keeps", keeps},
          {"reference", reference.to_json()},
          {"cells", cs},
          {"notes", notes}};
}

ScorerTable run_scorer_table(VisionLanguageModel& model, const std::string& model_dir,
                             const eval::Dataset& dataset, const ScorerTableOptions& options,
                             const std::function<void(const ScorerTableCell&)>& on_cell,
                             eval::WorkSharing* sharing) {
  options.validate();
  const auto& shape = model.shape();
  ScorerTable t;
  t.model_dir = model_dir;
  t.model_hash = eval::model_folder_hash(model_dir);
  t.dataset = dataset.jsonl_path;
  t.dataset_hash = dataset.hash;
  t.batch = options.eval.batch_size;
  t.n_visual = shape.n_visual_tokens;
  for (auto k : options.keeps)
    if (k >= t.n_visual)
      t.notes.push_back("K = " + std::to_string(k) + " is not below N_v = " + std::to_string(t.n_visual) +
                        ": column left out");
    else
      t.keeps.push_back(k);
  std::vector<std::string> scorers = options.scorers;
  if (scorers.empty()) {
    for (const auto& e : scorer_registry()) {
      if (e.name == "gate" && !std::filesystem::exists(default_gate_path(model_dir))) {
        t.notes.push_back("gate: no learned gate beside the model (run `vispco train-gate --model " +
                          model_dir + "`): row left out");
        continue;
      }
      if (!e.make()->applies_to(shape)) {
        t.notes.push_back(e.name + ": does not apply to " + shape.architecture + ": row left out");
        continue;
      }
      scorers.push_back(e.name);
      if (e.name == "fastv") scorers.push_back("pdrop");
    }
  }
  // Every plan bound first (cheap), so a bad scorer or a missing gate fails before any evaluation.
  struct Job {
    std::string scorer;
    int64_t keep;
    BoundPlan plan;
  };
  const ScorerEnv env{model_dir};
  std::vector<Job> jobs;
  jobs.push_back({"none", t.n_visual, BoundPlan::bind(PruningPlan(), shape, env)});
  for (const auto& s : scorers)
    for (auto k : t.keeps) {
      const std::string text = scorer_table_plan(s, k, shape, options.llm_layer);
      if (s == "pool" && text != "pool:layer=0,keep=" + std::to_string(k))
        t.notes.push_back("pool at K = " + std::to_string(k) + " keeps the largest square ≤ K: `" + text +
                          "`");
      jobs.push_back({s, k, BoundPlan::bind(text, shape, env)});
    }
  for (auto& job : jobs) {
    eval::EvalOptions o = options.eval;
    o.out_dir.clear();
    const eval::EvalReport rep =
        sharing != nullptr ? eval::evaluate_plan_shared(model, t.model_hash, dataset, o, job.plan, *sharing)
                           : eval::evaluate_plan(model, t.model_hash, dataset, o, job.plan);
    ScorerTableCell c;
    c.scorer = job.scorer;
    c.keep = job.keep;
    c.plan = job.plan.text();
    c.mean_kept = rep.mean_n_visual_kept;
    c.metrics = rep.metrics;
    c.mean_ttft_ms = rep.mean_ttft_ms;
    double n_text = 0, prepass = 0;
    for (const auto& r : rep.rows) {
      if (auto it = r.result.extra.find("n_text"); it != r.result.extra.end()) n_text += it->get<double>();
      if (auto it = r.result.extra.find("prepass_ms"); it != r.result.extra.end())
        prepass += it->get<double>();
    }
    const double n = std::max<double>(1.0, static_cast<double>(rep.rows.size()));
    c.mean_prepass_ms = prepass / n;
    const int64_t nt = std::llround(n_text / n);
    const auto full = prefill_flops(shape.flops, unpruned_tokens_per_layer(shape.flops, nt));
    const auto pruned = prefill_flops(shape.flops, plan_tokens_per_layer(job.plan.plan(), shape, nt));
    double flops = static_cast<double>(pruned.total);
    // The gradient pre-pass: an unpruned decoder forward and its backward (≈ 2 forwards).
    if (std::any_of(job.plan.plan().stages.begin(), job.plan.plan().stages.end(),
                    [](const PruneStage& st) { return make_scorer(st.scorer)->needs().saliency; }))
      flops += 3.0 * static_cast<double>(full.decoder_total + full.lm_head);
    c.flops_ratio = flops / static_cast<double>(full.total);
    t.n_samples = rep.rows.size();
    if (on_cell) on_cell(c);
    if (job.scorer == "none")
      t.reference = c;
    else
      t.cells.push_back(c);
  }
  return t;
}

std::string ScorerTable::to_markdown(const std::string& command, const std::string& banner) const {
  std::string md = "# Pruning scorers side by side\n\n";
  md += "<!-- Generated by vispco scorer-table (command below); do not edit by hand. -->\n\n";
  if (!banner.empty()) md += "> **" + banner + "**\n\n";
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  md += "Generated " + std::string(date) + " by `" + command + "`.\n\n";
  md += "- model: `" + model_dir + "` (" + model_hash.substr(0, 19) +
        "…), N_v = " + std::to_string(n_visual) + "\n";
  md += "- dataset: `" + dataset + "` (" + dataset_hash.substr(0, 19) + "…), " + std::to_string(n_samples) +
        " samples per cell\n";
  md +=
      "- greedy decoding; accuracy = the headline score (exact match after normalisation, VQA soft accuracy "
      "where human answers exist); [lower–upper] = its 95 % Wilson score interval over the samples "
      "(eval/interval.h); retention = accuracy ÷ unpruned accuracy\n";
  const eval::Interval ref_ci =
      eval::wilson_interval(reference.metrics.overall.accuracy(), reference.metrics.overall.n);
  md += strf("- unpruned: %.1f %% accuracy [%.1f–%.1f], TTFT %.0f ms\n\n",
             100.0 * reference.metrics.overall.accuracy(), 100.0 * ref_ci.lower, 100.0 * ref_ci.upper,
             reference.mean_ttft_ms);

  const auto cell_of = [&](const std::string& s, int64_t k) -> const ScorerTableCell* {
    for (const auto& c : cells)
      if (c.scorer == s && c.keep == k) return &c;
    return nullptr;
  };
  std::vector<std::string> order;
  for (const auto& c : cells)
    if (std::find(order.begin(), order.end(), c.scorer) == order.end()) order.push_back(c.scorer);
  const double ref = reference.metrics.overall.accuracy();

  // A scorer × K table: header, then one row per scorer with `cell(cell or nullptr)` per K.
  const auto scorer_by_k = [&](const std::function<std::string(const ScorerTableCell*)>& cell) {
    md += "| scorer |";
    for (auto k : keeps) md += " K = " + std::to_string(k) + " |";
    md += "\n|---|";
    for (size_t i = 0; i < keeps.size(); ++i) md += "---:|";
    md += "\n";
    for (const auto& s : order) {
      md += "| " + s + " |";
      for (auto k : keeps) md += cell(cell_of(s, k));
      md += "\n";
    }
  };

  md += "## Accuracy % [95 % interval] (retention) by kept visual tokens K\n\n";
  scorer_by_k([&](const ScorerTableCell* c) {
    const double acc = c ? c->metrics.overall.accuracy() : 0;
    const eval::Interval ci = c ? eval::wilson_interval(acc, c->metrics.overall.n) : eval::Interval{};
    return !c        ? std::string(" – |")
           : ref > 0 ? strf(" %.1f [%.1f–%.1f] (%.2f) |", 100.0 * acc, 100.0 * ci.lower, 100.0 * ci.upper,
                            acc / ref)
                     : strf(" %.1f [%.1f–%.1f] |", 100.0 * acc, 100.0 * ci.lower, 100.0 * ci.upper);
  });

  md += "\n## Cost: prefill FLOPs (% of unpruned) and measured TTFT (ms)\n\n";
  md +=
      "FLOPs from the analytic model (cost/flops.h) at the mean prompt length; `grad` includes its gradient "
      "pre-pass (≈ 3 unpruned decoder prefills). TTFT is the wall time to the first token of a batch of " +
      std::to_string(batch) + " on the machine that ran the table (shared, so treat it as indicative).\n\n";
  scorer_by_k([&](const ScorerTableCell* c) {
    return c ? strf(" %.0f %% / %.0f |", 100.0 * c->flops_ratio, c->mean_ttft_ms) : std::string(" – |");
  });

  std::vector<std::string> families;
  for (const auto& [f, _] : reference.metrics.per_family) families.push_back(f);
  for (auto k : keeps) {
    md += "\n## Per family at K = " + std::to_string(k) + " (accuracy %)\n\n| scorer |";
    for (const auto& f : families) md += " " + f + " |";
    md += " all |\n|---|";
    for (size_t i = 0; i <= families.size(); ++i) md += "---:|";
    md += "\n";
    const auto row = [&](const std::string& name, const eval::MetricSummary& m) {
      md += "| " + name + " |";
      for (const auto& f : families) {
        const auto it = m.per_family.find(f);
        md += it == m.per_family.end() ? std::string(" – |") : strf(" %.1f |", 100.0 * it->second.accuracy());
      }
      md += strf(" %.1f |\n", 100.0 * m.overall.accuracy());
    };
    row("unpruned", reference.metrics);
    for (const auto& s : order)
      if (const auto* c = cell_of(s, k)) row(s, c->metrics);
  }

  if (!keeps.empty()) {
    md += "\n## Plans\n\n| scorer | plan at K = " + std::to_string(keeps.back()) +
          " | visual tokens kept (mean) |\n|---|---|---:|\n";
    for (const auto& s : order)
      if (const auto* c = cell_of(s, keeps.back()))
        md += "| " + s + " | `" + c->plan + "` |" + strf(" %.1f |\n", c->mean_kept);
  }
  if (!notes.empty()) {
    md += "\n## Notes\n\n";
    for (const auto& n : notes) md += "- " + n + "\n";
  }
  return md;
}

}  // namespace vispco::optimize
