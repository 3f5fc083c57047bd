// Soft threshold and straight-through keep mask (VisPCO §3.2) as a selector.
#include "prune/soft_threshold.h"

#include <ATen/ATen.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/json_fields.h"

namespace vispco {

void SoftThresholdOptions::validate() const {
  if (!(width > 0)) throw InvalidArgument("soft threshold: width must be > 0, got " + std::to_string(width));
  if (!(temperature > 0))
    throw InvalidArgument("soft threshold: temperature must be > 0, got " + std::to_string(temperature));
}

static const JsonFields<SoftThresholdOptions>& soft_threshold_options_fields() {
  using T = SoftThresholdOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<SoftThresholdOptions> fields("soft threshold", {
      {"width", &T::width}, {"temperature", &T::temperature}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const SoftThresholdOptions& o) { return soft_threshold_options_fields().write(o); }

SoftThresholdOptions soft_threshold_options_from_json(const nlohmann::json& j) {
  return soft_threshold_options_fields().read_valid(j);
}

KeepMask soft_keep_mask(const at::Tensor& scores, const at::Tensor& alive, const at::Tensor& keep,
                        const SoftThresholdOptions& opts) {
  opts.validate();
  if (scores.dim() != 2 || alive.sizes() != scores.sizes() || keep.dim() != 1 ||
      keep.size(0) != scores.size(0))
    throw InvalidArgument("soft_keep_mask: expected scores [B, N], alive [B, N], keep [B]");
  const int64_t N = scores.size(1);
  auto s = scores.detach().to(at::kFloat);
  auto alive_f = alive.to(at::kFloat);
  // Dead tokens rank last, just below the lowest alive score (bounded, so the threshold stays bounded).
  auto lowest = s.masked_fill(alive.logical_not(), INFINITY).amin(1, /*keepdim=*/true);  // [B, 1]
  s = at::where(alive, s, lowest - 1.0);
  auto sorted = std::get<0>(s.sort(1, /*descending=*/true));  // [B, N]
  auto rank = at::arange(N, s.options()).unsqueeze(0);        // [1, N]
  auto centre = keep.to(at::kFloat).unsqueeze(1) - 0.5;       // [B, 1]
  auto w = at::exp(-(rank - centre).pow(2) / opts.width);     // [B, N]
  KeepMask m;
  m.threshold = (sorted * w).sum(1, true) / (w.sum(1, true) + 1e-8);
  m.hard = (s >= m.threshold.detach()).to(at::kFloat) * alive_f;
  m.soft = at::sigmoid((s - m.threshold) / opts.temperature) * alive_f;
  m.ste = m.soft + (m.hard - m.soft).detach();
  return m;
}

at::Tensor threshold_scores(const at::Tensor& scores, const at::Tensor& alive) {
  auto a = scores.detach().to(at::kFloat);
  auto lo = a.masked_fill(alive.logical_not(), INFINITY).amin(1, true);
  auto hi = a.masked_fill(alive.logical_not(), -INFINITY).amax(1, true);
  auto norm = ((a - lo) / (hi - lo + 1e-8)).clamp(0.0, 1.0).masked_fill(alive.logical_not(), 0.0);
  return at::log(norm + 1e-8);
}

SoftThresholdSelector::SoftThresholdSelector(SoftThresholdOptions opts) : opts_(opts) { opts_.validate(); }

Selection SoftThresholdSelector::select(const at::Tensor& scores, const ScoreInput& in) const {
  Selection s;
  s.scores = scores;
  s.keep = top_k_indices(scores, in.stage->keep);
  return s;
}

KeepMask SoftThresholdSelector::relax(const at::Tensor& scores, const at::Tensor& alive,
                                      const at::Tensor& keep) const {
  return soft_keep_mask(threshold_scores(scores, alive), alive, keep, opts_);
}

}  // namespace vispco
