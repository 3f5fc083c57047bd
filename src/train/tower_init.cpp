// Tower initialisations (see tower_init.h).
#include "train/tower_init.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>

#include "core/errors.h"

namespace vispco::train {

void sincos_position_init(ClipVisionModel& tower, double scale) {
  const int64_t D = tower->cfg.hidden_size, G = tower->cfg.grid();
  if (D % 4 != 0)
    throw InvalidArgument("sincos_position_init: hidden size " + std::to_string(D) +
                          " is not a multiple of 4");
  if (!(scale > 0)) throw InvalidArgument("sincos_position_init: scale must be > 0");
  at::NoGradGuard no_grad;
  const int64_t F = D / 4;
  auto table = at::zeros({1 + G * G, D}, at::kDouble);
  auto t = table.accessor<double, 2>();
  for (int64_t r = 0; r < G; ++r)
    for (int64_t c = 0; c < G; ++c)
      for (int64_t k = 0; k < F; ++k) {
        const double w = std::pow(10000.0, -static_cast<double>(k) / static_cast<double>(F));
        const int64_t row = 1 + r * G + c;
        t[row][k] = scale * std::sin(r * w);
        t[row][F + k] = scale * std::cos(r * w);
        t[row][2 * F + k] = scale * std::sin(c * w);
        t[row][3 * F + k] = scale * std::cos(c * w);
      }
  auto& weight = tower->position_embedding->weight;
  weight.copy_(table.to(weight.scalar_type()));
}

void mimetic_tower_init(ClipVisionModel& tower, double beta) {
  if (!(beta >= 0)) throw InvalidArgument("mimetic_tower_init: beta must be ≥ 0");
  at::NoGradGuard no_grad;
  const int64_t D = tower->cfg.hidden_size;
  const double s = 1.0 / std::sqrt(static_cast<double>(D));
  for (const auto& layer : *tower->layers) {
    auto& attn = *layer->as<ClipEncoderLayerImpl>()->self_attn;
    auto q = attn.q_proj->weight, k = attn.k_proj->weight, v = attn.v_proj->weight, o = attn.out_proj->weight;
    q.normal_(0, s);
    k.copy_(q + at::randn_like(q) * (0.2 * s));
    v.normal_(0, s);
    o.copy_(v.t() * -beta);
    for (auto* lin : {&attn.q_proj, &attn.k_proj, &attn.v_proj, &attn.out_proj}) (*lin)->bias.zero_();
  }
}

}  // namespace vispco::train
