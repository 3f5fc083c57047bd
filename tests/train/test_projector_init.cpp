// The projector's data-dependent initialisation: the folded layer equals the old layer applied to
// standardised inputs, computed here by hand.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/llava/presets.h"
#include "train/projector_init.h"

namespace vispco::train {
namespace {

TEST(ProjectorInit, FoldsStandardisationIntoTheFirstLayer) {
  const auto cfg = find_preset("tiny").config;
  auto net = random_llava_net(cfg, 3, at::kFloat);
  auto& proj = net->multi_modal_projector;
  const int64_t dv = cfg.vision.hidden_size;
  at::manual_seed(5);
  // Features with a large common offset and uneven scales, like a tower's residual stream.
  auto feats = at::randn({3, 16, dv}) * at::linspace(0.5, 4.0, dv) + 30.0;
  auto w0 = proj->linear_1->weight.detach().clone(), b0 = proj->linear_1->bias.detach().clone();
  auto flat = feats.reshape({-1, dv});
  auto mu = flat.mean(0), sd = flat.std(0);

  standardise_projector_input(proj, feats);

  at::NoGradGuard ng;
  auto x = at::randn({5, dv}) * 3.0 + 20.0;
  auto expected = at::linear((x - mu) / sd, w0, b0);
  EXPECT_TRUE(at::allclose(proj->linear_1->forward(x), expected, 1e-4, 1e-4));
  // On the sample itself the first layer now sees zero-mean inputs: its mean output is its old bias.
  auto out_mean = proj->linear_1->forward(flat).mean(0);
  EXPECT_TRUE(at::allclose(out_mean, b0, 1e-4, 1e-4));
}

TEST(ProjectorInit, RejectsFeaturesOfTheWrongWidth) {
  auto net = random_llava_net(find_preset("tiny").config, 3, at::kFloat);
  EXPECT_THROW(standardise_projector_input(net->multi_modal_projector, at::randn({1, 4, 7})),
               InvalidArgument);
  EXPECT_THROW(standardise_projector_input(net->multi_modal_projector,
                                           at::randn({1, 1, find_preset("tiny").config.vision.hidden_size})),
               InvalidArgument);
}

}  // namespace
}  // namespace vispco::train
