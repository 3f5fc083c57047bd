// Prefill cost in /metrics (issue 49): per plan, the decoder prefill FLOPs a request spent with its plan and
// the FLOPs its pruning saved against the same request unpruned (the analytic model of cost/flops.h, the
// numbers behind the reply's prefill_flops_ratio), and with a price per PFLOP the money spent and saved.
// Shadow runs (serve/shadow.h) are counted apart, under their own metric, since they are the monitor's cost.
#pragma once
#include <string>

#include "serve/metrics.h"

namespace vispco::serve {

/// Adds one answered request's prefill cost. @param plan the canonical plan text (label)
/// @param flops, unpruned_flops decoder prefill FLOPs with the plan and without pruning (cost/flops.h)
/// @param price_per_pflop 0 = no money counters @param shadow a shadow run (counted apart)
void record_prefill_cost(Metrics& m, const std::string& plan, double flops, double unpruned_flops,
                         double price_per_pflop, bool shadow);

/// Declares the counters record_prefill_cost() adds to (names in docs/serving.md).
void declare_cost_metrics(Metrics& m);

}  // namespace vispco::serve
