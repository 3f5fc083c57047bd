// Held-out per-family probe (see heldout_probe.h).
#include "train/heldout_probe.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "cost/timer.h"
#include "eval/evaluator.h"
#include "eval/metrics.h"
#include "eval/synthvqa/families.h"
#include "eval/synthvqa/generator.h"
#include "model/generate.h"

namespace vispco::train {

nlohmann::json ProbeResult::to_json() const {
  return {{"accuracy", accuracy}, {"overall", overall}, {"n", n}, {"seconds", seconds}};
}

ProbeResult heldout_probe(VisionLanguageModel& model, uint64_t seed, int64_t per_family, int64_t batch) {
  return heldout_probe(
      model, seed, per_family, batch,
      {eval::synthvqa::make_sample, static_cast<int64_t>(eval::synthvqa::family_table().size())});
}

ProbeResult heldout_probe(VisionLanguageModel& model, uint64_t seed, int64_t per_family, int64_t batch,
                          const ProbeSource& source, PrefillHook* hook) {
  if (per_family < 1 || batch < 1)
    throw InvalidArgument("heldout_probe: per_family and batch must be ≥ 1, got " +
                          std::to_string(per_family) + " and " + std::to_string(batch));
  Stopwatch sw;
  const auto n = source.n_families * per_family;
  const GenerationConfig gc = eval::default_eval_generation();
  eval::MetricSummary sum;
  ProbeResult r;
  for (int64_t start = 0; start < n; start += batch) {
    std::vector<eval::synthvqa::SynthSample> samples;
    std::vector<VlmRequest> reqs;
    for (int64_t i = start; i < std::min(n, start + batch); ++i) {
      samples.push_back(source.make(seed, static_cast<uint64_t>(i)));
      reqs.push_back({model.preprocess(samples.back().rgb), model.prompt_ids(samples.back().question)});
    }
    const auto out = generate(model, reqs, gc, hook);
    for (size_t b = 0; b < samples.size(); ++b) {
      sum.add(samples[b].family, eval::score_answer(out.texts[b], samples[b].answer, {}));
      r.predictions.push_back(out.texts[b]);
    }
  }
  for (const auto& [family, t] : sum.per_family) r.accuracy[family] = t.exact_match();
  r.overall = sum.overall.exact_match();
  r.n = static_cast<int64_t>(sum.overall.n);
  r.seconds = sw.ms() / 1000.0;
  return r;
}

GateVerdict check_probe_gates(const std::vector<ProbeGate>& gates, int64_t last_probe, int64_t now,
                              double overall, const std::optional<PendingGate>& pending) {
  GateVerdict v;
  if (pending && overall < pending->gate.min_accuracy) {
    char buf[320];
    std::snprintf(
        buf, sizeof buf,
        "stopped by the held-out probe: overall accuracy %.3f at decoder step %ld is below the gate %.3f "
        "at step %ld, as was %.3f at decoder step %ld (recipe probe_gates)",
        overall, (long)now, pending->gate.min_accuracy, (long)pending->gate.decoder_step, pending->overall,
        (long)pending->failed_at);
    v.stop = buf;
    return v;
  }
  for (const auto& g : gates)
    if (g.decoder_step > last_probe && g.decoder_step <= now && overall < g.min_accuracy &&
        (!v.pending || g.min_accuracy > v.pending->gate.min_accuracy))
      v.pending = PendingGate{.gate = g, .failed_at = now, .overall = overall};
  return v;
}

}  // namespace vispco::train
