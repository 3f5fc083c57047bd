// A seeded pseudo-random generator whose every output is fixed by the C++ standard, so SynthVQA is
// byte-identical across compilers and standard libraries: std::mt19937_64 (its sequence is specified) with
// explicit integer→range mappings, never std::*_distribution or std::shuffle (implementation-defined).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace vispco::eval::synthvqa {

/// SplitMix64 finaliser (Steele et al. 2014): a bijective 64-bit mix, used to derive independent seeds.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The seed of sample `index` of a dataset with seed `seed`: independent of the sample count, so the first
/// N samples of seed S are the same whatever count is asked for.
constexpr uint64_t sample_seed(uint64_t seed, uint64_t index) { return splitmix64(splitmix64(seed) ^ index); }

/// mt19937_64 with portable range mappings. Not thread-safe; one per sample.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  /// The next raw 64-bit output of mt19937_64.
  uint64_t next() { return engine_(); }

  /// Uniform integer in [lo, hi] (inclusive) as lo + next() mod (hi − lo + 1). The modulo bias is below
  /// 2^-40 for the ranges used here (< 2^24 values). Requires lo ≤ hi.
  int uniform_int(int lo, int hi) {
    const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo + 1);
    return static_cast<int>(lo + static_cast<int64_t>(next() % span));
  }

  /// Uniform index in [0, n), n ≥ 1.
  size_t index(size_t n) { return static_cast<size_t>(next() % n); }

  /// Uniform double in [0, 1) from the top 53 bits.
  double uniform01() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

  /// True with probability p (p in [0, 1]).
  bool bernoulli(double p) { return uniform01() < p; }

  /// One element of a non-empty vector, uniformly.
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[index(v.size())];
  }

  /// Fisher–Yates shuffle driven by index(): the same permutation everywhere.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[index(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace vispco::eval::synthvqa
