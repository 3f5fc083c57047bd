// Empirical Pareto frontier of evaluated plans in (FLOPs ratio ↓, accuracy ↑) (DESIGN.md §2, §6 "grid").
#pragma once
#include <cstddef>
#include <vector>

namespace vispco::optimize {

/// One evaluated plan as the frontier sees it.
struct ParetoPoint {
  double cost = 0.0;      ///< FLOPs ratio (lower is better)
  double accuracy = 0.0;  ///< accuracy (higher is better)
};

/// Indices of the points that no other point dominates, ordered by cost ascending (input order among exact
/// duplicates). Point b dominates a when cost_b ≤ cost_a and accuracy_b ≥ accuracy_a with at least one
/// strict. Hence:
///  - equal cost, different accuracy: only the more accurate is on the frontier;
///  - equal accuracy, different cost: only the cheaper;
///  - exact duplicates (same cost and accuracy): none dominates the other, so all are on the frontier, next
///    to each other — a report shows them as equivalent plans.
/// Along the returned frontier cost is non-decreasing and accuracy strictly increases between distinct
/// points.
/// @throws InvalidArgument when a value is NaN or infinite.
std::vector<size_t> pareto_frontier(const std::vector<ParetoPoint>& points);

}  // namespace vispco::optimize
