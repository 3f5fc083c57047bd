// ε with stated confidence (issue 18): an upper confidence bound on a plan's accuracy loss against the
// unpruned model, paired over the same n samples. For 0/1 scores it is exact and unconditional: with b
// samples lost and c gained, loss = (b − c)/n = p̂_b − p̂_c, and loss_U = U_b − L_c where U_b is the one-sided
// Clopper–Pearson upper bound on p_b and L_c the lower bound on p_c, each at level 1 − α/2 (Clopper & Pearson
// 1934; Bonferroni over the two, so the pair holds with probability ≥ 1 − α). Unlike the conditional exact
// McNemar test it does not collapse to 0 when no sample is discordant: 0 lost of 64 still bounds the loss
// by 4.6 % at 0.9. For soft scores (VQA accuracy) a paired percentile bootstrap over samples (Efron &
// Tibshirani 1993 §13), fixed seed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::optimize {

/// A plan's accuracy loss on n paired samples and its upper confidence bound.
struct LossBound {
  size_t n = 0;
  size_t lost = 0, gained = 0;  ///< samples the plan scores lower / higher than the reference
  double loss = 0;              ///< mean(reference − plan), accuracy fraction (negative: the plan gains)
  double upper = 0;             ///< upper confidence bound on the loss at `confidence`
  double confidence = 0;
  std::string method;  ///< "clopper-pearson-paired" | "paired-bootstrap"
  nlohmann::json to_json() const;
};

/// One-sided Clopper–Pearson upper bound on a binomial proportion: the q with P(X ≤ x | m, q) = 1 −
/// confidence (1 when x = m). @throws InvalidArgument for x > m or confidence outside (0, 1).
double clopper_pearson_upper(size_t x, size_t m, double confidence);
/// One-sided lower bound: the q with P(X ≥ x | m, q) = 1 − confidence (0 when x = 0).
double clopper_pearson_lower(size_t x, size_t m, double confidence);

/// @param reference, plan per-sample scores in [0, 1], same samples in the same order (n ≥ 1)
/// @param confidence in (0, 1), e.g. 0.9 @param seed the bootstrap's (soft scores only)
/// @throws InvalidArgument for different lengths, no samples or a confidence outside (0, 1).
LossBound paired_loss_bound(const std::vector<double>& reference, const std::vector<double>& plan,
                            double confidence, uint64_t seed = 0);

/// A two-sided interval on a paired accuracy loss (reference − plan, accuracy fraction).
struct LossInterval {
  size_t n = 0;
  double loss = 0;  ///< point estimate
  double lower = 0, upper = 0;
  double level = 0;    ///< two-sided coverage, e.g. 0.95
  std::string method;  ///< as LossBound::method
  nlohmann::json to_json() const;
};

/// Two-sided interval at `level` from two one-sided paired_loss_bound() calls, each at 1 − (1 − level)/2:
/// upper = the upper bound on reference − plan, lower = − the upper bound on plan − reference. For 0/1 scores
/// each end is the Clopper–Pearson-on-lost-and-gained bound above, so its two binomial bounds sit at
/// 1 − (1 − level)/4 each (e.g. 0.9875 for a 95 % interval). Same arguments and errors as
/// paired_loss_bound(); level in (0, 1).
LossInterval paired_loss_interval(const std::vector<double>& reference, const std::vector<double>& plan,
                                  double level, uint64_t seed = 0);

/// Whether a loss is within ε: absolute (loss ≤ ε) or relative to the reference accuracy (loss ≤ ε·ref).
bool loss_within(double loss, double epsilon, bool absolute, double reference_accuracy);

}  // namespace vispco::optimize
