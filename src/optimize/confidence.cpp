// Paired confidence bounds on accuracy loss (see confidence.h).
#include "optimize/confidence.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "core/errors.h"

namespace vispco::optimize {

namespace {

// P(X ≤ x) for X ~ Binomial(m, q), summed in log space.
double binomial_cdf(size_t x, size_t m, double q) {
  if (q <= 0) return 1.0;
  if (q >= 1) return x >= m ? 1.0 : 0.0;
  double sum = 0;
  const double lq = std::log(q), lp = std::log1p(-q);
  for (size_t k = 0; k <= x; ++k)
    sum += std::exp(std::lgamma(m + 1.0) - std::lgamma(k + 1.0) - std::lgamma(m - k + 1.0) + k * lq +
                    (m - k) * lp);
  return std::min(1.0, sum);
}

bool binary(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double s) { return s == 0.0 || s == 1.0; });
}

}  // namespace

nlohmann::json LossBound::to_json() const {
  return {{"n", n},          {"lost", lost},   {"gained", gained},
          {"loss", loss},    {"upper", upper}, {"confidence", confidence},
          {"method", method}};
}

double clopper_pearson_upper(size_t x, size_t m, double confidence) {
  if (x > m) throw InvalidArgument("clopper-pearson: x > m");
  if (!(confidence > 0 && confidence < 1)) throw InvalidArgument("confidence must be in (0, 1)");
  if (x == m) return 1.0;
  double lo = static_cast<double>(x) / std::max<size_t>(m, 1), hi = 1.0;  // the CDF falls as q grows
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (binomial_cdf(x, m, mid) > 1.0 - confidence ? lo : hi) = mid;
  }
  return hi;
}

double clopper_pearson_lower(size_t x, size_t m, double confidence) {
  if (x > m) throw InvalidArgument("clopper-pearson: x > m");
  return 1.0 - clopper_pearson_upper(m - x, m, confidence);  // X ≥ x under q ⇔ m − X ≤ m − x under 1 − q
}

LossBound paired_loss_bound(const std::vector<double>& reference, const std::vector<double>& plan,
                            double confidence, uint64_t seed) {
  if (reference.size() != plan.size() || reference.empty())
    throw InvalidArgument(
        "paired loss bound: the reference and the plan need the same, non-empty sample list");
  if (!(confidence > 0 && confidence < 1))
    throw InvalidArgument("paired loss bound: confidence must be in (0, 1)");
  LossBound b;
  b.n = reference.size();
  b.confidence = confidence;
  double sum = 0;
  for (size_t i = 0; i < b.n; ++i) {
    const double d = reference[i] - plan[i];
    sum += d;
    if (d > 0) ++b.lost;
    if (d < 0) ++b.gained;
  }
  b.loss = sum / static_cast<double>(b.n);
  if (binary(reference) && binary(plan)) {
    b.method = "clopper-pearson-paired";
    const double each = 1.0 - (1.0 - confidence) / 2.0;  // Bonferroni over the two one-sided bounds
    b.upper = clopper_pearson_upper(b.lost, b.n, each) - clopper_pearson_lower(b.gained, b.n, each);
    return b;
  }
  b.method = "paired-bootstrap";
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, b.n - 1);
  const int n_boot = 2000;
  std::vector<double> losses(n_boot);
  for (auto& l : losses) {
    double s = 0;
    for (size_t i = 0; i < b.n; ++i) {
      const size_t j = pick(rng);
      s += reference[j] - plan[j];
    }
    l = s / static_cast<double>(b.n);
  }
  std::sort(losses.begin(), losses.end());
  b.upper = losses[std::min<size_t>(n_boot - 1, static_cast<size_t>(std::ceil(confidence * n_boot)) - 1)];
  return b;
}

nlohmann::json LossInterval::to_json() const {
  return {{"n", n}, {"loss", loss}, {"lower", lower}, {"upper", upper}, {"level", level}, {"method", method}};
}

LossInterval paired_loss_interval(const std::vector<double>& reference, const std::vector<double>& plan,
                                  double level, uint64_t seed) {
  if (!(level > 0 && level < 1)) throw InvalidArgument("paired loss interval: level must be in (0, 1)");
  const double each = 1.0 - (1.0 - level) / 2.0;
  const LossBound up = paired_loss_bound(reference, plan, each, seed);
  const LossBound gain = paired_loss_bound(plan, reference, each, seed);
  LossInterval i;
  i.n = up.n;
  i.loss = up.loss;
  i.upper = up.upper;
  i.lower = -gain.upper;
  i.level = level;
  i.method = up.method;
  return i;
}

bool loss_within(double loss, double epsilon, bool absolute, double reference_accuracy) {
  return loss <= (absolute ? epsilon : epsilon * reference_accuracy) + 1e-12;
}

}  // namespace vispco::optimize
