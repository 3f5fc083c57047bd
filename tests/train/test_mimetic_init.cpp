// The mimetic attention initialisation of the decoder (train/mimetic_init.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/llama.h"
#include "train/mimetic_init.h"

namespace vispco::train {
namespace {

TEST(MimeticInit, TiesQueryToKeyAndOutputToValue) {
  TextConfig c;
  c.vocab_size = 64, c.hidden_size = 48, c.intermediate_size = 64, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2;
  LlamaForCausalLM lm(c);
  at::manual_seed(0);
  mimetic_attention_init(lm, 0.5);
  const int64_t Dh = 12, G = 2;
  for (int64_t l = 0; l < 2; ++l) {
    auto& a = *lm->model->layers[l]->as<LlamaDecoderLayerImpl>()->self_attn;
    for (int64_t j = 0; j < 2; ++j) {
      auto lead = a.q_proj->weight.narrow(0, j * G * Dh, Dh).flatten();
      auto key = a.k_proj->weight.narrow(0, j * Dh, Dh).flatten();
      const double cos = (lead.dot(key) / (lead.norm() * key.norm())).item<double>();
      EXPECT_GT(cos, 0.95);  // noise 0.2 of the signal's scale: cos ≈ 1/√(1 + 0.04)
      for (int64_t g = 0; g < G; ++g)
        EXPECT_TRUE(at::allclose(a.o_proj->weight.narrow(1, (j * G + g) * Dh, Dh),
                                 a.v_proj->weight.narrow(0, j * Dh, Dh).t() * 0.25));
    }
    // A token attends to itself more than to an unrelated one: the lead head's logit q(x)·k(x) is on
    // average well above the spread of q(x)·k(y) (with independent q and k both average 0).
    auto x = at::randn({512, 48}), y = at::randn({512, 48});
    auto q = x.matmul(a.q_proj->weight.narrow(0, 0, Dh).t());
    auto self = (q * x.matmul(a.k_proj->weight.narrow(0, 0, Dh).t())).sum(-1);
    auto cross = (q * y.matmul(a.k_proj->weight.narrow(0, 0, Dh).t())).sum(-1);
    EXPECT_GT(self.mean().item<double>(), 2 * cross.std().item<double>());
  }
  EXPECT_THROW(mimetic_attention_init(lm, -1), InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
