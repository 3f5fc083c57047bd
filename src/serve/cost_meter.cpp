// Prefill FLOPs and money counters per plan (see cost_meter.h).
#include "serve/cost_meter.h"

#include <cmath>

namespace vispco::serve {

void declare_cost_metrics(Metrics& m) {
  m.declare("vispco_prefill_flops_total", "counter",
            "Decoder prefill FLOPs spent on requests, by plan (analytic model, cost/flops.h)");
  m.declare("vispco_prefill_flops_saved_total", "counter",
            "Decoder prefill FLOPs pruning saved against the same requests unpruned, by plan");
  m.declare("vispco_prefill_cost_total", "counter",
            "Decoder prefill FLOPs spent times --price-per-pflop / 1e15, by plan");
  m.declare("vispco_prefill_cost_saved_total", "counter",
            "Decoder prefill FLOPs saved times --price-per-pflop / 1e15, by plan");
  m.declare("vispco_shadow_prefill_flops_total", "counter",
            "Decoder prefill FLOPs spent on shadow runs (unpruned), by the plan they check");
}

void record_prefill_cost(Metrics& m, const std::string& plan, double flops, double unpruned_flops,
                         double price_per_pflop, bool shadow) {
  if (!std::isfinite(flops) || !std::isfinite(unpruned_flops)) return;
  const std::map<std::string, std::string> label = {{"plan", plan}};
  if (shadow) {
    m.add("vispco_shadow_prefill_flops_total", flops, label);
    return;
  }
  const double saved = unpruned_flops - flops;
  m.add("vispco_prefill_flops_total", flops, label);
  m.add("vispco_prefill_flops_saved_total", saved, label);
  if (price_per_pflop > 0) {
    m.add("vispco_prefill_cost_total", flops / 1e15 * price_per_pflop, label);
    m.add("vispco_prefill_cost_saved_total", saved / 1e15 * price_per_pflop, label);
  }
}

}  // namespace vispco::serve
