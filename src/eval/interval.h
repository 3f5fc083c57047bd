// Confidence intervals of an accuracy measured on n samples.
#pragma once
#include <cstddef>

namespace vispco::eval {

/// A two-sided interval [lower, upper] in [0, 1].
struct Interval {
  double lower = 0;
  double upper = 0;
};

/// Wilson score interval of a binomial proportion (Wilson, JASA 1927; Brown, Cai & DasGupta, Stat. Sci. 2001
/// §4.1): for accuracy p ∈ [0, 1] on n samples and normal quantile z (1.959964 → 95 %),
/// centre (p + z²/2n) / (1 + z²/n), half-width z √(p(1−p)/n + z²/4n²) / (1 + z²/n). Unlike p ± z·SE it stays
/// in [0, 1] and is not empty at p = 0 or 1. For soft (non-binary) per-sample scores it is the usual
/// approximation. n = 0 gives [0, 1]. @throws InvalidArgument for p outside [0, 1] or z ≤ 0.
Interval wilson_interval(double p, size_t n, double z = 1.959964);

}  // namespace vispco::eval
