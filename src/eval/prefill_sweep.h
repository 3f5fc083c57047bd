// Pruning sweep of the prefill benchmark (issue 5, "Benchmark"): for each plan template (one per scorer) and
// each kept-token count K, the decoder prefill time with the plan's PrefillHook, the KV-cache bytes after the
// prefill and the FLOPs model (cost/flops.h) at the tokens each layer actually saw (DecoderStats), against
// the unpruned reference (K = N_v, no hook): measured speedup next to the FLOPs-predicted one. Built on
// PrefillBenchSetup (eval/prefill_bench.h); used by `vispco bench --sweep-keep … --sweep-plan …`.
#pragma once
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "cost/flops.h"
#include "eval/prefill_bench.h"
#include "model/shape.h"
#include "prune/plan.h"

namespace vispco::eval {

/// What a sweep varies (a plain value).
struct PrefillSweepSpec {
  /// Kept visual tokens K, each in [1, N_v], no repeats; rows follow this order. Empty when keep_percents is
  /// given.
  std::vector<int64_t> keeps;
  /// Plan templates, one per scorer, each giving one row per K: a single stage without keep
  /// ("fastv:layer=2": ",keep=K" is appended) or any plan text with "{K}" where K goes
  /// ("fastv:layer=2,keep={K}+random:layer=10,keep=8"). At least one.
  std::vector<std::string> plan_templates;
  /// Instead of keeps: keep ratios in percent, each in (0, 100], no repeats. Each row's plan says keep=P%,
  /// resolved per image from its own N_v (prune/plan.h resolve_keep), so the sweep fits images of any size
  /// (dynamic resolution, tiling); the row's K is the benchmark image's resolved count.
  std::vector<double> keep_percents = {};
  /// Checks that the lists are non-empty and every (template, K) plan parses and fits `shape`
  /// (PruningPlan::validate). @throws InvalidArgument naming the template, K and the problem.
  void validate(const ModelShape& shape) const;
  bool operator==(const PrefillSweepSpec&) const = default;
};

/// Parses a comma-separated list of K, e.g. "576,288,192,128,64".
/// @throws InvalidArgument naming the bad piece (empty, not an integer, < 1, repeated).
std::vector<int64_t> parse_keep_list(const std::string& text);
/// Parses a comma-separated list of keep ratios, every piece ending in '%', e.g. "50%,25%,11.1%".
/// @throws InvalidArgument naming the bad piece (empty, not a number, outside (0, 100], repeated).
std::vector<double> parse_keep_percent_list(const std::string& text);
/// The spec of `vispco bench --sweep-keep TEXT --sweep-plan …`: a list of counts, or of ratios when the
/// pieces end in '%' (all or none). @throws InvalidArgument as the two parsers, or for a mixed list.
PrefillSweepSpec parse_sweep_spec(const std::string& keep_text, std::vector<std::string> plan_templates);

/// The plan of `plan_template` (PrefillSweepSpec::plan_templates) at K = keep.
/// @throws InvalidArgument when the template fixes keep= itself, has several stages without "{K}", or does
///         not parse (parse_plan's message, prefixed with the template). @param n_layers the decoder's L, for
///         PyramidDrop's default layers (0 = unknown).
PruningPlan sweep_plan(const std::string& plan_template, int64_t keep, int64_t n_visual,
                       int64_t n_layers = 0);
/// As above with K written as plan text: a count ("64") or a keep ratio ("25%").
PruningPlan sweep_plan(const std::string& plan_template, const std::string& keep, int64_t n_visual,
                       int64_t n_layers = 0);

/// One (template, K) of a sweep, or the unpruned reference (template "none", K = N_v, no hook).
struct PrefillSweepRow {
  std::string plan_template;              ///< "none" for the reference
  std::string plan;                       ///< canonical plan text (PruningPlan::to_string)
  int64_t keep = 0;                       ///< K asked (for a keep ratio: its count on the benchmark image)
  double keep_percent = 0;                ///< the keep ratio asked, percent (0: K was asked as a count)
  int64_t n_visual_kept = 0;              ///< visual tokens alive after the prefill (N_v when nothing pruned)
  std::vector<int64_t> tokens_per_layer;  ///< [L] tokens entering each decoder layer, measured
  int64_t kv_cache_bytes = 0;             ///< KV cache (keys, values, validity flags) after the prefill
  double prefill_ms = 0;                  ///< median decoder prefill + last logits, pruning work included
  std::vector<double> prefill_ms_runs;    ///< every timed repetition
  PrefillFlops flops;                     ///< FLOPs model at tokens_per_layer (LM head at the last position)
  int64_t flops_llm = 0;                  ///< flops.decoder_total + flops.lm_head
  double vision_ms =
      0;  ///< median vision tower + projector this row needs ([CLS] attention included if asked)
  double measured_speedup = 0;  ///< reference prefill_ms / prefill_ms
  double flops_speedup = 0;     ///< reference flops_llm / flops_llm
  double efficiency = 0;        ///< measured_speedup / flops_speedup (1 = the FLOPs limit reached)
  double measured_speedup_with_vision = 0;  ///< (reference vision_ms + prefill_ms) / (vision_ms + prefill_ms)
  double flops_speedup_with_vision = 0;     ///< reference flops.total / flops.total
  nlohmann::json to_json() const;
};

/// Figures of one sweep. Times are wall clock, median of `repeats` after one warm-up per row.
/// The run (PrefillRunInfo; its batch: times and KV bytes per batch, FLOPs per image), then its rows.
struct PrefillSweepResult : PrefillRunInfo {
  std::string model;                   ///< PrefillBenchConfig::model_label()
  double vision_ms = 0;                ///< median vision tower + projector
  std::vector<double> vision_ms_runs;  ///< its timed repetitions
  double vision_cls_ms = 0;            ///< the same with [CLS] attention and keys (0: no template needs them)
  std::vector<double> vision_cls_ms_runs;
  std::vector<PrefillSweepRow> rows;  ///< the reference first, then template by template, K in spec order
  nlohmann::json to_json() const;
  /// A fixed-width table, one line per row, for the terminal.
  std::string table() const;
};

/// Checks `spec` against the model's config (before building it; again against the benchmark image's N_v
/// after), builds the setup, times the vision tower
/// (and its [CLS]-attention variant when a template needs it), the unpruned prefill, then every (template,
/// K).
/// @param progress if set, called with a short line before each phase. @throws InvalidArgument (bad spec).
PrefillSweepResult run_prefill_sweep(const PrefillBenchConfig& cfg, const PrefillSweepSpec& spec,
                                     const std::function<void(const std::string&)>& progress = {});

}  // namespace vispco::eval
