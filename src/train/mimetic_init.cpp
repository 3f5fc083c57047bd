// Mimetic initialisation of the decoder's attention (see mimetic_init.h).
#include "train/mimetic_init.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "core/errors.h"

namespace vispco::train {

void mimetic_attention_init(LlamaForCausalLM& lm, double alpha) {
  if (!(alpha >= 0)) throw InvalidArgument("mimetic_attention_init: alpha must be ≥ 0");
  at::NoGradGuard no_grad;
  const auto& cfg = lm->cfg;
  const int64_t D = cfg.hidden_size, H = cfg.num_attention_heads, Hkv = cfg.n_kv_heads(), Dh = cfg.d_head();
  const int64_t G = H / Hkv;
  const double s = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    auto& attn = *lm->model->layers[l]->as<LlamaDecoderLayerImpl>()->self_attn;
    auto q = attn.q_proj->weight, k = attn.k_proj->weight, v = attn.v_proj->weight, o = attn.o_proj->weight;
    q.normal_(0, s);
    v.normal_(0, s);
    for (int64_t j = 0; j < Hkv; ++j) {
      auto lead = q.narrow(0, j * G * Dh, Dh);
      k.narrow(0, j * Dh, Dh).copy_(lead + at::randn({Dh, D}, q.options()) * (0.2 * s));
      for (int64_t g = 1; g < G; ++g)
        q.narrow(0, (j * G + g) * Dh, Dh).copy_(lead + at::randn({Dh, D}, q.options()) * (0.5 * s));
      for (int64_t g = 0; g < G; ++g)
        o.narrow(1, (j * G + g) * Dh, Dh)
            .copy_(v.narrow(0, j * Dh, Dh).t() * (alpha / static_cast<double>(G)));
    }
  }
}

}  // namespace vispco::train
