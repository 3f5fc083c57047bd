// Violation rates of ε over re-drawn calibration subsets (see epsilon_coverage.h).
#include "optimize/epsilon_coverage.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/errors.h"
#include "optimize/confidence.h"

namespace vispco::optimize {

nlohmann::json CoverageResult::to_json() const {
  return {{"n_calib", options.n_calib},
          {"draws", options.draws},
          {"epsilon", options.epsilon},
          {"epsilon_absolute", options.absolute},
          {"confidence", options.confidence},
          {"violation_rate_point", violation_rate_point},
          {"violation_rate_bound", violation_rate_bound},
          {"mean_keep_point", mean_keep_point},
          {"mean_keep_bound", mean_keep_bound},
          {"rule",
           "per draw: the smallest ladder K whose calibration loss (point) or upper loss bound is within ε; "
           "violation: its test-split loss exceeds ε"}};
}

CoverageResult epsilon_coverage(const LadderTable& pool, const LadderTable& test, const CoverageOptions& o) {
  pool.validate();
  test.validate();
  if (pool.ladder != test.ladder)
    throw InvalidArgument("epsilon coverage: the tables have different ladders");
  if (o.n_calib < 1 || o.n_calib > pool.n() || o.draws < 1)
    throw InvalidArgument("epsilon coverage: need 1 ≤ n_calib ≤ pool size (" + std::to_string(pool.n()) +
                          ") and ≥ 1 draw");
  const size_t R = pool.rungs();
  // Test-split loss of every rung.
  std::vector<bool> test_violates(R);
  double test_ref = 0;
  for (size_t i = 0; i < test.n(); ++i) test_ref += test.score[i][R - 1];
  test_ref /= static_cast<double>(test.n());
  for (size_t r = 0; r < R; ++r) {
    double acc = 0;
    for (size_t i = 0; i < test.n(); ++i) acc += test.score[i][r];
    acc /= static_cast<double>(test.n());
    test_violates[r] = !loss_within(test_ref - acc, o.epsilon, o.absolute, test_ref);
  }
  CoverageResult res;
  res.options = o;
  std::mt19937_64 rng(o.seed);
  std::vector<size_t> idx(pool.n());
  std::iota(idx.begin(), idx.end(), 0);
  size_t v_point = 0, v_bound = 0;
  double k_point = 0, k_bound = 0;
  for (size_t d = 0; d < o.draws; ++d) {
    for (size_t j = 0; j < o.n_calib; ++j)
      std::swap(idx[j], idx[j + rng() % (idx.size() - j)]);  // partial shuffle
    std::vector<double> ref(o.n_calib);
    double ref_acc = 0;
    for (size_t j = 0; j < o.n_calib; ++j) ref_acc += ref[j] = pool.score[idx[j]][R - 1];
    ref_acc /= static_cast<double>(o.n_calib);
    size_t chosen_point = R - 1, chosen_bound = R - 1;
    bool have_point = false, have_bound = false;
    for (size_t r = 0; r + 1 < R && !(have_point && have_bound); ++r) {
      std::vector<double> s(o.n_calib);
      for (size_t j = 0; j < o.n_calib; ++j) s[j] = pool.score[idx[j]][r];
      const auto b = paired_loss_bound(ref, s, o.confidence, o.seed + d);
      if (!have_point && loss_within(b.loss, o.epsilon, o.absolute, ref_acc)) {
        chosen_point = r;
        have_point = true;
      }
      if (!have_bound && loss_within(b.upper, o.epsilon, o.absolute, ref_acc)) {
        chosen_bound = r;
        have_bound = true;
      }
    }
    v_point += test_violates[chosen_point];
    v_bound += test_violates[chosen_bound];
    k_point += static_cast<double>(pool.ladder[chosen_point]);
    k_bound += static_cast<double>(pool.ladder[chosen_bound]);
  }
  const double n = static_cast<double>(o.draws);
  res.violation_rate_point = v_point / n;
  res.violation_rate_bound = v_bound / n;
  res.mean_keep_point = k_point / n;
  res.mean_keep_bound = k_bound / n;
  return res;
}

}  // namespace vispco::optimize
