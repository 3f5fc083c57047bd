// Pareto frontier by one sort and a sweep; see pareto.h.
#include "optimize/pareto.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/errors.h"

namespace vispco::optimize {

std::vector<size_t> pareto_frontier(const std::vector<ParetoPoint>& points) {
  for (size_t i = 0; i < points.size(); ++i)
    if (!std::isfinite(points[i].cost) || !std::isfinite(points[i].accuracy))
      throw InvalidArgument("Pareto frontier: point " + std::to_string(i) +
                            " has a non-finite cost or accuracy");
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  // Cost ascending; at equal cost the most accurate first; input order among exact duplicates.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (points[a].cost != points[b].cost) return points[a].cost < points[b].cost;
    return points[a].accuracy > points[b].accuracy;
  });
  std::vector<size_t> front;
  for (size_t i : order) {
    const ParetoPoint& p = points[i];
    if (front.empty()) {
      front.push_back(i);
      continue;
    }
    const ParetoPoint& last = points[front.back()];
    // Every earlier point costs ≤ p. p survives only if it is more accurate than all of them (the best so far
    // is `last`), or is an exact duplicate of `last`.
    if (p.accuracy > last.accuracy || (p.accuracy == last.accuracy && p.cost == last.cost))
      front.push_back(i);
  }
  return front;
}

}  // namespace vispco::optimize
