// The tiny random Qwen2.5-VL (init-random's "tiny-qwen2.5-vl") through the code every family shares (issue
// 44's family checks, tests/model/family_checks.h): evaluation batched and pruned, a min-K search, and a
// served chat completion equal to generate(). Its images keep their aspect ratio: the 48×40 noise images make
// 6 visual tokens (smart_resize to 56×84 px: 2 × 3 merged), the served 200×200 PNG 49 (196×196 px: 7 × 7);
// VisionZip ranks by the last ViT block's received attention (the tower has no [CLS] token).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/eval_fixture.h"
#include "model/family_checks.h"
#include "model/qwen2_vl/presets.h"
#include "serve/server_fixture.h"
#include "test_util.h"

namespace vispco {
namespace {

const std::string& tiny_qwen_dir() {
  return testing::written_once([](const testing::TempDir& dir) {
    write_random_qwen2_vl(dir.str(), find_qwen2_vl_preset("tiny-qwen2.5-vl").config, 3, c10::kFloat);
    return dir.str();
  });
}

VisionLanguageModel load_tiny_qwen() { return VisionLanguageModel::load(tiny_qwen_dir(), RunContext{}); }

TEST(Qwen2VlPipeline, EvaluatesAndSearchesThroughTheSameCode) {
  testing::TempDir tmp;
  const auto dir = tmp.path() / "ds";
  auto m = load_tiny_qwen();
  testing::write_own_answers_dataset(m, dir, testing::write_noise_images(dir, 6), "q");
  testing::expect_evaluates_and_searches(m, tiny_qwen_dir(), dir,
                                         "answers are the model's own, batched or not");
}

TEST(Qwen2VlPipeline, ServesChatCompletionsAsGenerateAnswers) {
  testing::expect_serves_as_generate(load_tiny_qwen(), tiny_qwen_dir(), testing::test_png(200, 5),
                                     "divprune:keep=8", 8);
}

// The server reports each request's own N_v: a 200×200 image makes 49 visual tokens (196 px: 7 × 7), a
// 100×100 one 16 (112 px: 4 × 4); prompt_tokens counts them with the text.
TEST(Qwen2VlPipeline, ServedUsageCountsEachImagesOwnTokens) {
  testing::ServerFixture f(load_tiny_qwen(), tiny_qwen_dir(), {}, {});
  auto c = f.client();
  for (const auto [size, n_visual] : {std::pair{200, 49}, std::pair{100, 16}}) {
    const auto res =
        c.Post("/v1/chat/completions", testing::chat_body("What?", testing::test_png(size, 1), 2).dump(),
               "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const auto reply = nlohmann::json::parse(res->body);
    EXPECT_EQ(reply["vispco"]["visual_tokens"], n_visual) << size;
    EXPECT_GT(reply["usage"]["prompt_tokens"].get<int64_t>(), n_visual) << size;
  }
}

// VisionZip without a [CLS] token: it ranks by the attention each merged token's patches receive in the
// tower's last block. On a 100×100 image (16 tokens), contextual=0 keeps the top 4 of encode_image_list's
// signal; the default keep=4 (3 dominant + 1 contextual) keeps 4. (Parity of the signal itself with the
// float64 reference: test_qwen_visionzip_reference.cpp.)
TEST(Qwen2VlPipeline, VisionZipKeepsTheTokensTheLastBlockAttendsToMost) {
  auto m = load_tiny_qwen();
  const VlmRequest req{m.preprocess(io::decode_image_rgb(testing::test_png(100, 2))), m.prompt_ids("What?")};
  at::Tensor received;
  {
    c10::InferenceMode guard;
    received = m.encode_image_list({req.pixels}, /*want_cls_attention=*/true).cls_attention[0].cpu();
  }
  ASSERT_EQ(received.numel(), 16);
  const auto top = std::get<0>(std::get<1>(received.topk(4)).sort());
  PlanHook hook(parse_plan("visionzip:keep=4,contextual=0", m.shape()), m.shape());
  const auto out = generate(m, {req}, testing::greedy(1), &hook);
  EXPECT_TRUE(at::nonzero(hook.traces().back().kept[0].cpu()).squeeze(1).equal(top));
  EXPECT_EQ(out.stats.n_visual_kept, 4);
  PlanHook merging(parse_plan("visionzip:keep=4", m.shape()), m.shape());
  EXPECT_EQ(generate(m, {req}, testing::greedy(1), &merging).stats.n_visual_kept, 4);
}

}  // namespace
}  // namespace vispco
