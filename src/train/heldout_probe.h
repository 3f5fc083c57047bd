// Held-out probe of a model in training: greedy answers through the inference path (generate(), all N_v visual
// tokens, the LLaVA-1.5 prompt) on SynthVQA scenes no training stage draws, scored per family. The trainer
// logs it every few decoder steps (<out>/probe.jsonl) so that the learning curves show when each family leaves
// its answer prior — the loss alone hid the prior plateau of earlier runs (docs/bundled-model-training.md).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/llava.h"

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

}  // namespace vispco::train
