// Held-out probe of a model in training: greedy answers through the inference path (generate(), all N_v
// visual tokens, the LLaVA-1.5 prompt) on SynthVQA scenes no training stage draws, scored per family. The
// trainer logs it every few decoder steps (<out>/probe.jsonl) so that the learning curves show when each
// family leaves its answer prior — the loss alone hid the prior plateau of earlier runs
// (docs/bundled-model-training.md).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/synthvqa/generator.h"
#include "model/llava/llava.h"
#include "train/recipe.h"

namespace vispco::train {

/// Accuracy (exact match after normalize_answer, in [0, 1]) per SynthVQA family and overall.
struct ProbeResult {
  std::map<std::string, double> accuracy;  ///< family name → accuracy
  double overall = 0;                      ///< mean over all probed samples
  int64_t n = 0;                           ///< samples probed
  double seconds = 0;                      ///< wall time of the probe
  std::vector<std::string> predictions;    ///< generated answer of each sample, in sample order (not logged)
  nlohmann::json to_json() const;          ///< {"accuracy": {...}, "overall", "n", "seconds"}
};

/// Probes `model` on SynthVQA samples 0 … 8·per_family − 1 of `seed` (make_sample cycles the 8 families, so
/// each family gets per_family samples with balanced answers), in batches of `batch`, greedy, ≤ 8 new tokens.
/// @throws InvalidArgument when per_family or batch < 1.
ProbeResult heldout_probe(VisionLanguageModel& model, uint64_t seed, int64_t per_family, int64_t batch = 16);

/// The benchmark a probe draws from: sample `index` of `seed` (a function that cycles `n_families` families
/// by index, as make_sample and make_hr_sample do).
struct ProbeSource {
  eval::synthvqa::SynthSample (*make)(uint64_t seed, uint64_t index);
  int64_t n_families;
};

/// As heldout_probe() above on samples 0 … n_families·per_family − 1 of `source`. Images of different sizes
/// may share a batch (generate() groups them by visual-token layout). @param hook optional pruning plan run
/// inside every prefill (the HR trainer's base-view gate: the same samples with the tiles removed).
/// @throws InvalidArgument as above.
ProbeResult heldout_probe(VisionLanguageModel& model, uint64_t seed, int64_t per_family, int64_t batch,
                          const ProbeSource& source, PrefillHook* hook = nullptr);

/// A probe gate whose probe fell below its bar, waiting for the next probe to confirm it.
struct PendingGate {
  ProbeGate gate;
  int64_t failed_at = 0;  ///< decoder step of the probe below the bar
  double overall = 0;     ///< that probe's overall accuracy
  bool operator==(const PendingGate&) const = default;
};

/// What the recipe's probe gates make of one held-out probe.
struct GateVerdict {
  std::optional<PendingGate> pending;  ///< a gate failed by this probe, to be confirmed by the next one
  std::string stop;                    ///< non-empty: the run stops here (the message says why)
};

/// Checks one probe (overall accuracy `overall` at decoder step `now`; the previous probe was at
/// `last_probe`) against the gates: a gate applies to the first probe at or after its decoder step. A probe
/// below a gate's bar makes it pending; the run stops only when the next probe is below that bar too. One
/// probe of 16 scenes per family can catch a transient: recipe 11 probed 0.21 at decoder step 1500 between
/// 0.45 (1250) and 0.50 (1750) and a single-probe gate stopped it (docs/bundled-model-training.md, session
/// 21). Of several gates failed at once the one with the highest bar is kept. `pending` is the previous
/// probe's pending gate.
GateVerdict check_probe_gates(const std::vector<ProbeGate>& gates, int64_t last_probe, int64_t now,
                              double overall, const std::optional<PendingGate>& pending);

}  // namespace vispco::train
