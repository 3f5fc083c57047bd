// Wilson score interval (eval/interval.h).
#include "eval/interval.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace vispco::eval {

Interval wilson_interval(double p, size_t n, double z) {
  if (!(p >= 0 && p <= 1)) throw InvalidArgument("wilson_interval: accuracy must be in [0, 1]");
  if (!(z > 0)) throw InvalidArgument("wilson_interval: z must be > 0");
  if (n == 0) return {0.0, 1.0};
  const double nn = static_cast<double>(n);
  const double z2 = z * z;
  const double denom = 1.0 + z2 / nn;
  const double centre = (p + z2 / (2 * nn)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / denom;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

}  // namespace vispco::eval
