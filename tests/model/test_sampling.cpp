// sample_next at the edges of the temperature range: a tiny temperature (inside OpenAI's [0, 2]) samples
// the argmax instead of failing on inf − inf, and an ordinary one still follows softmax(logits / T).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/generate.h"

namespace vispco {
namespace {

TEST(Sampling, ATinyTemperatureSamplesTheArgmax) {
  const auto logits = at::tensor({1.5f, -2.0f, 3.25f, 3.0f, 0.0f}).unsqueeze(0);  // argmax 2
  for (const double t : {1e-300, 1e-320, 1e-30, 1e-12}) {
    GenerationConfig gc;
    gc.temperature = t;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_next(logits, gc, gen).item<int64_t>(), 2) << t;
  }
}

TEST(Sampling, AnOrdinaryTemperatureFollowsTheSoftmax) {
  // Two tokens with logits 0 and log 3 at T = 1: token 1 has probability 3/4.
  const auto logits = at::tensor({0.0f, static_cast<float>(std::log(3.0))}).unsqueeze(0);
  GenerationConfig gc;
  gc.temperature = 1.0;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  int ones = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) ones += sample_next(logits, gc, gen).item<int64_t>() == 1;
  // Binomial(4000, 0.75): sd ≈ 27.4; ±5 sd.
  EXPECT_NEAR(ones, 3000, 137);
}

}  // namespace
}  // namespace vispco
