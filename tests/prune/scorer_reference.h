// Plain, slow reference computations shared by the scorer tests (written for clarity, batch row 0 only).
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "model/llava/llava.h"
#include "model/reference.h"
#include "model/token_state.h"

namespace vispco::testing {

/// Head-mean attention probabilities of query token `t` over every key s ≤ t at decoder layer `layer`, from
/// the tokens entering that layer (`seen`, row 0, no padding): RMSNorm, q/k projections, RoPE, softmax.
inline std::vector<double> attention_row_by_hand(VisionLanguageModel& m, const TokenState& seen,
                                                 int64_t layer, int64_t t) {
  const auto& cfg = m.config().text;
  auto params = m.net()->named_parameters();
  auto W = [&](const std::string& n) {
    return params["language_model.model.layers." + std::to_string(layer) + "." + n];
  };
  auto h = seen.hidden[0];
  const int64_t T = h.size(0), H = cfg.num_attention_heads, Hkv = cfg.n_kv_heads(), Dh = cfg.d_head();
  auto x = ref::rms_norm(h, W("input_layernorm.weight"), cfg.rms_norm_eps);
  auto q = at::matmul(x, W("self_attn.q_proj.weight").t());
  auto k = at::matmul(x, W("self_attn.k_proj.weight").t());
  std::vector<int64_t> pos(T);
  for (int64_t s = 0; s < T; ++s) pos[s] = seen.positions[0][s].item<int64_t>();
  std::vector<double> row(T, 0.0);
  for (int64_t hd = 0; hd < H; ++hd) {
    const int64_t kv = hd / (H / Hkv);
    auto qh = ref::rope(q.narrow(1, hd * Dh, Dh).contiguous(), pos, cfg.rope_theta);
    auto kh = ref::rope(k.narrow(1, kv * Dh, Dh).contiguous(), pos, cfg.rope_theta);
    std::vector<double> logit(T, -1e300);
    double mx = -1e300, z = 0;
    for (int64_t s = 0; s <= t; ++s) {
      logit[s] = at::dot(qh[t], kh[s]).item<double>() / std::sqrt(double(Dh));
      mx = std::max(mx, logit[s]);
    }
    for (int64_t s = 0; s <= t; ++s) z += std::exp(logit[s] - mx);
    for (int64_t s = 0; s <= t; ++s) row[s] += std::exp(logit[s] - mx) / z / H;
  }
  return row;
}

/// Keys of every token at decoder layer `layer` (after RoPE), by hand, [T, H_kv·D_h] (row 0).
inline at::Tensor keys_by_hand(VisionLanguageModel& m, const TokenState& seen, int64_t layer) {
  const auto& cfg = m.config().text;
  auto params = m.net()->named_parameters();
  auto W = [&](const std::string& n) {
    return params["language_model.model.layers." + std::to_string(layer) + "." + n];
  };
  auto h = seen.hidden[0];
  const int64_t T = h.size(0), Hkv = cfg.n_kv_heads(), Dh = cfg.d_head();
  auto x = ref::rms_norm(h, W("input_layernorm.weight"), cfg.rms_norm_eps);
  auto k = at::matmul(x, W("self_attn.k_proj.weight").t());
  std::vector<int64_t> pos(T);
  for (int64_t s = 0; s < T; ++s) pos[s] = seen.positions[0][s].item<int64_t>();
  std::vector<at::Tensor> heads;
  for (int64_t kv = 0; kv < Hkv; ++kv)
    heads.push_back(ref::rope(k.narrow(1, kv * Dh, Dh).contiguous(), pos, cfg.rope_theta));
  return at::cat(heads, 1);
}

/// Indices (into T, row 0) of the instruction tokens: valid text after the last visual token.
inline std::vector<int64_t> instruction_tokens(const TokenState& s) {
  const int64_t T = s.visual.size(1);
  int64_t last = -1;
  for (int64_t t = 0; t < T; ++t)
    if (s.visual[0][t].item<bool>()) last = t;
  std::vector<int64_t> out;
  for (int64_t t = last + 1; t < T; ++t)
    if (s.valid[0][t].item<bool>()) out.push_back(t);
  return out;
}

/// Indices (into T, row 0) of the visual tokens.
inline std::vector<int64_t> visual_tokens(const TokenState& s) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < s.visual.size(1); ++t)
    if (s.visual[0][t].item<bool>()) out.push_back(t);
  return out;
}

/// Cosine similarity of two 1-D tensors, in double.
inline double cosine(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.to(at::kDouble), y = b.to(at::kDouble);
  return (at::dot(x, y) / (x.norm() * y.norm()).clamp_min(1e-300)).item<double>();
}

/// Records the tokens entering decoder layer `at_layer` and, when `keys` is set, the keys of layer
/// at_layer − 1 (PrefillHook::wants_keys); prunes nothing.
struct RecordHook : PrefillHook {
  int64_t at_layer;
  bool want_keys;
  TokenState seen;
  at::Tensor keys;
  RecordHook(int64_t l, bool k = false) : at_layer(l), want_keys(k) {}
  bool acts_before(int64_t layer) const override { return layer == at_layer; }
  bool wants_keys(int64_t layer) const override { return want_keys && layer + 1 == at_layer; }
  bool apply(int64_t, TokenState& s, const LayerSignals& sig) override {
    seen = s;
    keys = sig.keys;
    return false;
  }
};

/// Patch indices kept after a plan's last stage (row 0), from its trace.
inline std::set<int64_t> kept_patches(const at::Tensor& kept_row) {
  std::set<int64_t> out;
  for (int64_t g = 0; g < kept_row.size(0); ++g)
    if (kept_row[g].item<bool>()) out.insert(g);
  return out;
}

}  // namespace vispco::testing
