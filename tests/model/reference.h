// Naive reference implementations for tests: plain loops and textbook formulas, written for clarity, with
// no code shared with src/model (STYLE.md: fast paths must match a naive reference).
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace vispco::ref {

/// RMSNorm by its definition, element by element. x [N, D], w [D].
inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  auto out = at::empty_like(x);
  auto xa = x.accessor<float, 2>();
  auto oa = out.accessor<float, 2>();
  auto wa = w.accessor<float, 1>();
  for (int64_t i = 0; i < x.size(0); ++i) {
    double ss = 0;
    for (int64_t j = 0; j < x.size(1); ++j) ss += double(xa[i][j]) * xa[i][j];
    const double r = 1.0 / std::sqrt(ss / x.size(1) + eps);
    for (int64_t j = 0; j < x.size(1); ++j) oa[i][j] = float(xa[i][j] * r * wa[j]);
  }
  return out;
}

/// RoPE as rotation of the pairs (x[i], x[i + D/2]) by angle pos · θ^(−2i/D). x [T, D], positions [T].
inline at::Tensor rope(const at::Tensor& x, const std::vector<int64_t>& pos, double theta) {
  const int64_t T = x.size(0), D = x.size(1), half = D / 2;
  auto out = at::empty_like(x);
  auto xa = x.accessor<float, 2>();
  auto oa = out.accessor<float, 2>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos[t] * std::pow(theta, -2.0 * i / D);
      const double c = std::cos(ang), s = std::sin(ang);
      const double a = xa[t][i], b = xa[t][i + half];
      oa[t][i] = float(a * c - b * s);
      oa[t][i + half] = float(b * c + a * s);
    }
  return out;
}

/// Causal attention of one head with loops: out[t] = Σ_s softmax_s(q[t]·k[s]/√D) v[s] over s ≤ t + past
/// and valid[s]. q [T, D], k/v [S, D], valid [S] bool.
inline at::Tensor attention_head(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const std::vector<bool>& valid, int64_t past) {
  const int64_t T = q.size(0), S = k.size(0), D = q.size(1);
  auto out = at::zeros({T, D}, q.options());
  auto qa = q.accessor<float, 2>();
  auto ka = k.accessor<float, 2>();
  auto va = v.accessor<float, 2>();
  auto oa = out.accessor<float, 2>();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> w(S, 0.0);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t s = 0; s < S; ++s) {
      if (!valid[s] || s > t + past) continue;
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(qa[t][d]) * ka[s][d];
      w[s] = dot / std::sqrt(double(D));
      mx = std::max(mx, w[s]);
    }
    double z = 0;
    for (int64_t s = 0; s < S; ++s) {
      if (!valid[s] || s > t + past) {
        w[s] = 0;
        continue;
      }
      w[s] = std::exp(w[s] - mx);
      z += w[s];
    }
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d) oa[t][d] += float(w[s] / z * va[s][d]);
  }
  return out;
}

}  // namespace vispco::ref
