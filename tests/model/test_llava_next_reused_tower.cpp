// LLaVA-NeXT images of different N_v through the callers that run the tower once and reuse its output
// (keep=auto's K features, the server's keep=auto path, `generate --plan …keep=auto`): each image's K
// features and its generated tokens are those it gets on its own, with the tower run inside generate().
#include <gtest/gtest.h>

#include "llava_next_model.h"
#include "model/decode_batch.h"
#include "model/generate.h"
#include "prune/auto_keep/k_features.h"

namespace vispco {
namespace {

std::vector<VlmRequest> mixed_requests(VisionLanguageModel& m) {
  const std::vector<std::pair<int, int>> sizes = {{60, 50}, {100, 100}, {15, 100}};  // N_v 36, 88, 40
  std::vector<VlmRequest> reqs;
  for (size_t i = 0; i < sizes.size(); ++i)
    reqs.push_back({m.preprocess(testing::pattern_image(sizes[i].first, sizes[i].second, 20 + int(i))),
                    m.prompt_ids("What shape is the blue object?")});
  return reqs;
}

TEST(LlavaNextReusedTower, KFeaturesOfAMixedBatchAreEachImagesOwn) {
  auto m = testing::load_tiny_next();
  const auto reqs = mixed_requests(m);
  std::vector<at::Tensor> px;
  std::vector<std::string> qs;
  for (const auto& r : reqs) {
    px.push_back(r.pixels);
    qs.push_back("How many spheres are there?");
  }
  const auto batch = k_features(m, m.encode_image_list(px, true), qs);
  ASSERT_EQ(batch.size(0), 3);
  for (int64_t b = 0; b < 3; ++b) {
    const auto alone = k_features(m, m.encode_image_list({px[b]}, true), {qs[b]});
    const double diff = (batch[b] - alone[0]).abs().max().item<double>();
    std::printf("row %ld: max |batched − alone| %.3g\n", (long)b, diff);
    EXPECT_LT(diff, 1e-5) << "row " << b;  // fp32; the entropy is normalised by the image's own N_v
  }
}

TEST(LlavaNextReusedTower, GenerateWithTheTowersOutputAttachedEqualsRunningTheTower) {
  auto m = testing::load_tiny_next();
  const auto reqs = mixed_requests(m);
  std::vector<at::Tensor> px;
  for (const auto& r : reqs) px.push_back(r.pixels);
  const auto vt = m.encode_image_list(px, true);
  std::vector<VlmRequest> attached;
  for (int64_t b = 0; b < 3; ++b) attached.push_back(with_visual_row(reqs[b], vt, b, m.shape()));
  EXPECT_EQ(attached[0].visual.embeds.size(0), 36);  // cut to its own N_v, not the batch's 88
  EXPECT_EQ(attached[2].visual.layouts.at(0).n_tokens, 40);
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  gc.stop_at_eos = false;
  const auto ran = generate(m, reqs, gc);
  const auto reused = generate(m, attached, gc);
  EXPECT_EQ(reused.tokens, ran.tokens);
}

}  // namespace
}  // namespace vispco
