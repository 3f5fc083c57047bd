// CDPruner (prune/scorers/cdpruner.cpp) against independent computations: the fast greedy DPP MAP equals a
// naive greedy that recomputes log-determinants; on small kernels its log-det is compared with exhaustive
// maximisation (equal where the optimum is clear, the gap printed elsewhere); on the tiny model the kept
// set equals the greedy MAP of a kernel rebuilt from the ℓ = 0 tokens in plain tensor ops.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/errors.h"
#include "model/generate.h"
#include "model/tiny_model.h"
#include "prune/plan_hook.h"
#include "prune/scorer_reference.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

double logdet(const at::Tensor& L, const std::vector<int64_t>& s) {
  if (s.empty()) return 0.0;
  auto idx = at::tensor(s, at::kLong);
  auto sub = L.index_select(0, idx).index_select(1, idx).to(at::kDouble);
  auto [sign, logabs] = at::linalg_slogdet(sub);
  return sign.item<double>() > 0 ? logabs.item<double>() : -1e300;  // a singular subset scores −∞
}

// Naive greedy: at each step the item maximising log det(L_{S ∪ i}), computed from scratch.
std::vector<int64_t> naive_greedy(const at::Tensor& L, int64_t k) {
  std::vector<int64_t> s;
  while ((int64_t)s.size() < k) {
    int64_t best = -1;
    double best_v = -1e301;
    for (int64_t i = 0; i < L.size(0); ++i) {
      if (std::find(s.begin(), s.end(), i) != s.end()) continue;
      auto t = s;
      t.push_back(i);
      const double v = logdet(L, t);
      if (v > best_v + 1e-12) best_v = v, best = i;
    }
    s.push_back(best);
  }
  return s;
}

// Exhaustive: the k-subset of largest log det.
std::pair<std::vector<int64_t>, double> exhaustive(const at::Tensor& L, int64_t k) {
  const int64_t n = L.size(0);
  std::vector<int64_t> best;
  double best_v = -1e301;
  std::vector<bool> mask(n, false);
  std::fill(mask.begin(), mask.begin() + k, true);
  do {
    std::vector<int64_t> s;
    for (int64_t i = 0; i < n; ++i)
      if (mask[i]) s.push_back(i);
    const double v = logdet(L, s);
    if (v > best_v) best_v = v, best = s;
  } while (std::prev_permutation(mask.begin(), mask.end()));
  return {best, best_v};
}

at::Tensor random_kernel(int64_t n, int64_t rank, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = at::randn({n, rank}, gen, at::kDouble);
  auto xn = x / x.norm(2, 1, true);
  auto q = at::rand({n}, gen, at::kDouble) + 0.1;
  return q.unsqueeze(1) * at::matmul(xn, xn.t()) * q.unsqueeze(0);  // diag(q) S diag(q), as CDPruner's kernel
}

TEST(CdPruner, FastGreedyEqualsNaiveGreedyAndIsCloseToExhaustive) {
  double worst_gap = 0;
  int n_equal = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto L = random_kernel(9, 6, seed);
    for (int64_t k : {2, 3, 4}) {
      auto fast = dpp_greedy_map(L, k);
      EXPECT_EQ(fast, naive_greedy(L, k)) << "seed " << seed << " k " << k;
      auto [best, best_v] = exhaustive(L, k);
      const double got = logdet(L, fast);
      EXPECT_LE(got, best_v + 1e-9);
      worst_gap = std::max(worst_gap, best_v - got);
      auto sorted = fast;
      std::sort(sorted.begin(), sorted.end());
      n_equal += sorted == best;
    }
  }
  std::printf("greedy DPP MAP vs exhaustive on 60 random 9×9 kernels: %d optimal, worst log-det gap %.3g\n",
              n_equal, worst_gap);
  EXPECT_GE(n_equal, 50);  // greedy is a heuristic (58 of 60 optimal when written), not an exact solver
  EXPECT_LT(worst_gap, 0.5);
}

TEST(CdPruner, GreedyFindsTheClearOptimumOfAClusteredKernel) {
  // Three clusters of near-duplicate directions; relevance q picks a favourite inside each cluster.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto dirs = at::eye(3, at::kDouble);
  std::vector<at::Tensor> xs;
  for (int c = 0; c < 3; ++c)
    for (int j = 0; j < 3; ++j) xs.push_back(dirs[c] + 0.05 * at::randn({3}, gen, at::kDouble));
  auto x = at::stack(xs);
  auto xn = x / x.norm(2, 1, true);
  auto q = at::tensor({0.5, 0.9, 0.6, 0.7, 0.4, 0.95, 0.3, 0.8, 0.5}, at::kDouble);
  auto L = q.unsqueeze(1) * at::matmul(xn, xn.t()) * q.unsqueeze(0);
  auto fast = dpp_greedy_map(L, 3);
  std::sort(fast.begin(), fast.end());
  EXPECT_EQ(fast, exhaustive(L, 3).first);
  EXPECT_EQ(fast, (std::vector<int64_t>{1, 5, 7}));  // the most relevant of each cluster
}

TEST(CdPruner, RankDeficientKernelStillYieldsKDistinctItems) {
  auto x = at::tensor({1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0}, at::kDouble).view({4, 2});  // 2 distinct dirs
  auto L = at::matmul(x, x.t());
  auto pick = dpp_greedy_map(L, 4);
  std::set<int64_t> s(pick.begin(), pick.end());
  EXPECT_EQ(s.size(), 4u);
  EXPECT_NE(pick[0] / 2, pick[1] / 2);  // the first two span both directions
}

TEST(CdPruner, TinyModelKeptSetEqualsGreedyMapOfAKernelRebuiltByHand) {
  auto m = testing::load_tiny();
  GenerationConfig gc;
  gc.max_new_tokens = 1;
  VlmRequest req{testing::test_pixels(56, 31), m.prompt_ids("How many red spheres are there?")};
  testing::RecordHook rec(0);
  generate(m, {req}, gc, &rec);
  for (const std::string opt : {"", ",theta=0.5"}) {
    PlanHook cd(parse_plan("cdpruner:layer=0,keep=5" + opt, 16), m.shape());
    generate(m, {req}, gc, &cd);
    ASSERT_EQ(cd.traces().size(), 1u);
    // Kernel by hand: cosine similarity of the visual tokens, relevance = mean cosine to the instruction
    // tokens, min–max normalised (+1e−6 as the release), q = r or exp(θ r / (2(1−θ))).
    const auto vis = testing::visual_tokens(rec.seen), txt = testing::instruction_tokens(rec.seen);
    const int64_t N = vis.size();
    std::vector<double> rel(N, 0.0);
    for (int64_t i = 0; i < N; ++i) {
      for (auto t : txt) rel[i] += testing::cosine(rec.seen.hidden[0][vis[i]], rec.seen.hidden[0][t]);
      rel[i] /= txt.size();
    }
    const double lo = *std::min_element(rel.begin(), rel.end()),
                 hi = *std::max_element(rel.begin(), rel.end());
    auto L = at::empty({N, N}, at::kDouble);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < N; ++j) {
        auto q = [&](int64_t a) {
          const double r = (rel[a] - lo + 1e-6) / (hi - lo);
          return opt.empty() ? r : std::exp(r * 0.5 / (2 * 0.5));
        };
        L[i][j] = q(i) * q(j) * testing::cosine(rec.seen.hidden[0][vis[i]], rec.seen.hidden[0][vis[j]]);
      }
    auto pick = naive_greedy(L, 5);
    std::set<int64_t> expect;
    for (auto i : pick) expect.insert(rec.seen.grid_index[0][vis[i]].item<int64_t>());
    EXPECT_EQ(testing::kept_patches(cd.traces()[0].kept[0]), expect) << opt;
  }
  EXPECT_THROW(PlanHook(parse_plan("cdpruner:layer=0,keep=5,theta=1", 16), m.shape()), InvalidArgument);
  EXPECT_THROW(PlanHook(parse_plan("cdpruner:layer=0,keep=5,theta=abc", 16), m.shape()), InvalidArgument);
}

}  // namespace
}  // namespace vispco
