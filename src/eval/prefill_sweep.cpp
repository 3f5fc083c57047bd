// Pruning sweep of the prefill benchmark (see prefill_sweep.h).
#include "eval/prefill_sweep.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/json_fields.h"
#include "prune/bound_plan.h"
#include "prune/plan_hook.h"

namespace vispco::eval {

namespace {

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t"), z = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, z - a + 1);
}

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// Wraps a plan error with the template and K it came from.
[[noreturn]] void rethrow_for(const std::string& plan_template, const std::string& keep,
                              const std::exception& e) {
  throw InvalidArgument("sweep plan '" + plan_template + "' at K=" + keep + ": " + e.what());
}

// A percent as plan text ("25%", "11.1%"), 15 significant digits as plan.cpp writes keep=P%.
std::string percent_text(double p) {
  std::ostringstream out;
  out << std::setprecision(15) << p << '%';
  return out.str();
}

// The sweep's K entries as plan text: counts, or ratios.
std::vector<std::string> keep_texts(const PrefillSweepSpec& spec) {
  std::vector<std::string> out;
  for (const auto k : spec.keeps) out.push_back(std::to_string(k));
  for (const auto p : spec.keep_percents) out.push_back(percent_text(p));
  return out;
}

}  // namespace

std::vector<int64_t> parse_keep_list(const std::string& text) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  std::istringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ',')) {
    const auto p = trim(piece);
    size_t used = 0;
    long long k = 0;
    try {
      k = std::stoll(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (p.empty() || used != p.size())
      throw InvalidArgument("sweep keep list '" + text + "': '" + p + "' is not an integer");
    if (k < 1) throw InvalidArgument("sweep keep list '" + text + "': K must be ≥ 1 (got " + p + ")");
    if (!seen.insert(k).second) throw InvalidArgument("sweep keep list '" + text + "': K " + p + " repeated");
    out.push_back(k);
  }
  if (out.empty() || (!text.empty() && text.back() == ','))
    throw InvalidArgument("sweep keep list '" + text + "' is empty or ends with a comma (e.g. 576,288,64)");
  return out;
}

std::vector<double> parse_keep_percent_list(const std::string& text) {
  std::vector<double> out;
  std::istringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ',')) {
    const auto p = trim(piece);
    size_t used = 0;
    double v = 0;
    try {
      if (!p.empty() && p.back() == '%') v = std::stod(p.substr(0, p.size() - 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (p.size() < 2 || used != p.size() - 1)
      throw InvalidArgument("sweep keep list '" + text + "': '" + p + "' is not a percentage (e.g. 25%)");
    if (!(v > 0 && v <= 100))
      throw InvalidArgument("sweep keep list '" + text + "': " + p + " is outside (0%, 100%]");
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw InvalidArgument("sweep keep list '" + text + "': " + p + " repeated");
    out.push_back(v);
  }
  if (out.empty() || text.back() == ',')
    throw InvalidArgument("sweep keep list '" + text + "' is empty or ends with a comma (e.g. 50%,25%,11%)");
  return out;
}

PrefillSweepSpec parse_sweep_spec(const std::string& keep_text, std::vector<std::string> plan_templates) {
  PrefillSweepSpec spec;
  spec.plan_templates = std::move(plan_templates);
  const size_t n_pieces = std::count(keep_text.begin(), keep_text.end(), ',') + 1;
  const size_t n_percent = std::count(keep_text.begin(), keep_text.end(), '%');
  if (n_percent == 0)
    spec.keeps = parse_keep_list(keep_text);
  else if (n_percent == n_pieces)
    spec.keep_percents = parse_keep_percent_list(keep_text);
  else
    throw InvalidArgument("sweep keep list '" + keep_text +
                          "' mixes counts and percentages; give all as counts (576,288) or all as ratios "
                          "(50%,25%)");
  return spec;
}

PruningPlan sweep_plan(const std::string& plan_template, int64_t keep, int64_t n_visual, int64_t n_layers) {
  return sweep_plan(plan_template, std::to_string(keep), n_visual, n_layers);
}

PruningPlan sweep_plan(const std::string& plan_template, const std::string& k, int64_t n_visual,
                       int64_t n_layers) {
  std::string text = plan_template;
  if (text.find("{K}") != std::string::npos) {
    for (size_t at = text.find("{K}"); at != std::string::npos; at = text.find("{K}", at + k.size()))
      text.replace(at, 3, k);
  } else if (text.find("keep=") != std::string::npos) {
    throw InvalidArgument("sweep plan '" + plan_template +
                          "' fixes keep= itself; leave it out (K is appended) or write keep={K}");
  } else if (text.find('+') != std::string::npos) {
    throw InvalidArgument("sweep plan '" + plan_template +
                          "' has several stages; write keep={K} where K goes");
  } else {
    text += (text.find(':') == std::string::npos ? ":keep=" : ",keep=") + k;
  }
  try {
    return parse_plan(text, n_visual, n_layers);
  } catch (const InvalidArgument& e) {
    rethrow_for(plan_template, k, e);
  }
}

void PrefillSweepSpec::validate(const ModelShape& shape) const {
  if (keeps.empty() == keep_percents.empty())
    throw InvalidArgument(keeps.empty() ? "a sweep needs at least one K (--sweep-keep 576,288,64 or 50%,25%)"
                                        : "a sweep takes K as counts or as keep ratios, not both");
  if (plan_templates.empty())
    throw InvalidArgument("a sweep needs at least one plan template (--sweep-plan fastv:layer=2)");
  const int64_t n_v = shape.n_visual_tokens;
  for (const auto k : keeps)
    if (k < 1 || k > n_v)
      throw InvalidArgument("sweep K " + std::to_string(k) + " is outside [1, N_v = " + std::to_string(n_v) +
                            "]");
  for (const auto p : keep_percents)
    if (!(p > 0 && p <= 100))
      throw InvalidArgument("sweep keep ratio " + percent_text(p) + " is outside (0%, 100%]");
  for (const auto& t : plan_templates)
    for (const auto& k : keep_texts(*this)) {
      const auto plan = sweep_plan(t, k, n_v, shape.n_layers);
      if (plan.empty()) throw InvalidArgument("sweep plan '" + t + "' is empty (the reference runs anyway)");
      try {
        plan.validate(shape);
      } catch (const InvalidArgument& e) {
        rethrow_for(t, k, e);
      }
    }
}

nlohmann::json PrefillSweepRow::to_json() const {
  using R = PrefillSweepRow;
  // clang-format off
  static const JsonFields<R> fields("prefill sweep row", {
      {"plan_template", &R::plan_template}, {"plan", &R::plan}, {"keep", &R::keep}, {"keep_percent", &R::keep_percent},
      {"n_visual_kept", &R::n_visual_kept}, {"tokens_per_layer", &R::tokens_per_layer},
      {"kv_cache_bytes", &R::kv_cache_bytes}, {"prefill_ms", &R::prefill_ms},
      {"prefill_ms_runs", &R::prefill_ms_runs}, {"vision_ms", &R::vision_ms}, {"flops_llm", &R::flops_llm},
      {"measured_speedup", &R::measured_speedup}, {"flops_speedup", &R::flops_speedup},
      {"efficiency", &R::efficiency}, {"measured_speedup_with_vision", &R::measured_speedup_with_vision},
      {"flops_speedup_with_vision", &R::flops_speedup_with_vision}});
  // clang-format on
  auto j = fields.write(*this);
  j["flops_with_vision"] = flops.total;
  j["flops"] = flops.to_json();
  return j;
}

nlohmann::json PrefillSweepResult::to_json() const {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& row : rows) r.push_back(row.to_json());
  nlohmann::json j = {{"model", model},
                      {"vision_ms", vision_ms},
                      {"vision_ms_runs", vision_ms_runs},
                      {"vision_cls_ms", vision_cls_ms},
                      {"vision_cls_ms_runs", vision_cls_ms_runs},
                      {"rows", r}};
  add_run_json(j);
  return j;
}

std::string PrefillSweepResult::table() const {
  std::ostringstream o;
  o << run_headline(model, " unpruned")
    << (batch > 1
            ? ", batch of " + std::to_string(batch) + " images (times and KV per batch, GFLOP per image)"
            : "")
    << ", median of " << repeats << " after 1 warm-up per row\n";
  char line[320];
  std::snprintf(line, sizeof line, "vision tower + projector %.1f ms", vision_ms);
  o << line;
  if (vision_cls_ms > 0) {
    std::snprintf(line, sizeof line, "; with [CLS] attention + keys (pre-LLM scorers) %.1f ms",
                  vision_cls_ms);
    o << line;
  }
  o << "\n";
  std::snprintf(line, sizeof line, "%-22s %5s %5s %10s %21s %9s %8s %8s %7s %7s %6s %7s %8s\n", "plan", "K",
                "kept", "prefill ms", "(min - max)", "KV MiB", "GFLOP", "+vision", "speedup", "FLOPs",
                "ratio", "+v meas", "+v FLOPs");
  o << line;
  for (const auto& r : rows) {
    const double lo =
        r.prefill_ms_runs.empty() ? 0 : *std::min_element(r.prefill_ms_runs.begin(), r.prefill_ms_runs.end());
    const double hi =
        r.prefill_ms_runs.empty() ? 0 : *std::max_element(r.prefill_ms_runs.begin(), r.prefill_ms_runs.end());
    std::snprintf(
        line, sizeof line,
        "%-22s %5lld %5lld %10.1f (%8.1f - %8.1f) %9.2f %8.1f %8.1f %7.2f %7.2f %6.2f %7.2f %8.2f\n",
        (r.keep_percent > 0 ? r.plan_template + " @" + percent_text(r.keep_percent) : r.plan_template)
            .c_str(),
        static_cast<long long>(r.keep), static_cast<long long>(r.n_visual_kept), r.prefill_ms, lo, hi,
        static_cast<double>(r.kv_cache_bytes) / 1048576.0, static_cast<double>(r.flops_llm) * 1e-9,
        static_cast<double>(r.flops.total) * 1e-9, r.measured_speedup, r.flops_speedup, r.efficiency,
        r.measured_speedup_with_vision, r.flops_speedup_with_vision);
    o << line;
  }
  o << "speedup = reference prefill ms / prefill ms; FLOPs = FLOPs-model speedup of decoder + LM head at the "
       "measured tokens per layer; ratio = speedup / FLOPs; +v = the same with vision tower + projector "
       "included\n";
  return o.str();
}

PrefillSweepResult run_prefill_sweep(const PrefillBenchConfig& cfg, const PrefillSweepSpec& spec,
                                     const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  spec.validate(bench_model_shape(cfg));  // before the (slow) build, at the nominal image
  say(cfg.build_line());
  PrefillBenchSetup setup(cfg);
  const ModelShape& shape = setup.image_shape();  // the benchmark image's N_v, FLOPs and grid
  spec.validate(shape);
  const int64_t n_v = shape.n_visual_tokens;
  const std::vector<std::string> keeps = keep_texts(spec);

  PrefillSweepResult res;
  res.record_run(cfg, setup);
  res.model = cfg.model_label();

  bool any_cls = false;
  for (const auto& t : spec.plan_templates) {
    const auto hook =
        BoundPlan::bind(sweep_plan(t, keeps.front(), n_v, shape.n_layers), shape, ScorerEnv{cfg.model_dir})
            .hook(0);
    any_cls = any_cls || (hook != nullptr && hook->wants_vision_attention());
  }
  say("vision encode ...");
  at::Tensor visual;
  res.vision_ms_runs = time_runs(cfg.repeats, [&] { visual = setup.run_vision(); });
  res.vision_ms = median(res.vision_ms_runs);
  VisualTokens cls;
  if (any_cls) {
    say("vision encode with [CLS] attention ...");
    res.vision_cls_ms_runs = time_runs(cfg.repeats, [&] { cls = setup.run_vision_tokens(true); });
    res.vision_cls_ms = median(res.vision_cls_ms_runs);
  }

  // One row: warm-up + timed prefills with `hook` (nullptr = the reference), stats from the last run.
  const auto measure = [&](PrefillSweepRow& row, PlanHook* hook) {
    PrefillRunStats stats;
    const bool wants_cls = hook != nullptr && hook->wants_vision_attention();
    row.prefill_ms_runs = time_runs(cfg.repeats, [&] {
      if (hook != nullptr)
        hook->begin(wants_cls ? cls.cls_attention : at::Tensor(), wants_cls ? cls.keys : at::Tensor(),
                    setup.layout());
      // A gradient scorer's pre-pass is pruning work: timed with the prefill.
      if (hook != nullptr && hook->wants_visual_saliency())
        hook->set_visual_saliency(setup.run_saliency(wants_cls ? cls.embeds : visual));
      setup.run_prefill(wants_cls ? cls.embeds : visual, hook, &stats);
    });
    row.prefill_ms = median(row.prefill_ms_runs);
    row.vision_ms = wants_cls ? res.vision_cls_ms : res.vision_ms;
    row.tokens_per_layer = stats.tokens_per_layer;
    row.n_visual_kept = stats.n_visual_kept;
    row.kv_cache_bytes = stats.kv_cache_bytes;
    row.flops = prefill_flops(shape.flops, row.tokens_per_layer);
    row.flops_llm = row.flops.decoder_total + row.flops.lm_head;
  };

  say("prefill, unpruned reference (K = " + std::to_string(n_v) + ") ...");
  PrefillSweepRow ref;
  ref.plan_template = "none";
  ref.plan = "none";
  ref.keep = n_v;
  measure(ref, nullptr);
  res.rows.push_back(ref);
  for (const auto& t : spec.plan_templates)
    for (const auto& k : keeps) {
      PrefillSweepRow row;
      row.plan_template = t;
      const BoundPlan bound =
          BoundPlan::bind(sweep_plan(t, k, n_v, shape.n_layers), shape, ScorerEnv{cfg.model_dir});
      PruneStage asked;  // K as the row asked it, resolved at the benchmark image's N_v
      if (k.back() == '%')
        asked.keep_percent = std::stod(k.substr(0, k.size() - 1));
      else
        asked.keep = std::stoll(k);
      row.keep = resolve_keep(asked, n_v);
      row.keep_percent = asked.keep_percent;
      const auto hook = bound.hook(cfg.seed);
      row.plan = bound.text();
      say("prefill, " + row.plan + " ...");
      measure(row, hook.get());
      res.rows.push_back(row);
    }
  for (auto& row : res.rows) {
    row.measured_speedup = ratio(ref.prefill_ms, row.prefill_ms);
    row.flops_speedup = ratio(static_cast<double>(ref.flops_llm), static_cast<double>(row.flops_llm));
    row.efficiency = ratio(row.measured_speedup, row.flops_speedup);
    row.measured_speedup_with_vision = ratio(ref.vision_ms + ref.prefill_ms, row.vision_ms + row.prefill_ms);
    row.flops_speedup_with_vision =
        ratio(static_cast<double>(ref.flops.total), static_cast<double>(row.flops.total));
  }
  return res;
}

}  // namespace vispco::eval
