// vispco's Qwen2-VL and Qwen2.5-VL forwards against an independent float64 PyTorch implementation of
// transformers v4.55's semantics (tests/reference/qwen2_vl_reference.py: smart_resize with Pillow's bicubic,
// merge-blocked pixel values, the 2-D rotary ViT with Qwen2.5-VL's windows, the merger, get_rope_index's
// M-RoPE positions and the Qwen2 decoder; sharing no code with vispco) on tiny random checkpoints the
// reference writes in the published layouts. Compared with LLaVA's tolerances: image features (relative
// 1e-5), logits at the last prompt position (1e-4), 16 greedy tokens; also N_v, the merged grid and the three
// position axes. Skipped with a message where python3 with torch, python3-regex or python3-pil is absent.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core/mat.hpp>
#include <tuple>

#include "model/generate.h"
#include "model/llava_next_model.h"
#include "model/python_reference.h"
#include "model/tiny_model.h"
#include "model/vlm.h"
#include "prune/plan_hook.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

std::string reference_script() {
  return (fs::path(::vispco::testing::source_dir()) / "tests/reference/qwen2_vl_reference.py").string();
}

// Debian's python3 when it has torch, regex and PIL; "" otherwise.
std::string python_for_reference() {
  const auto py = testing::python_with_torch();
  if (py.empty() || std::system((py + " -c 'import regex, PIL' > /dev/null 2>&1").c_str()) != 0) return "";
  return py;
}

void write_ppm(const fs::path& p, const cv::Mat& rgb) {
  std::ofstream f(p, std::ios::binary);
  f << "P6\n" << rgb.cols << " " << rgb.rows << "\n255\n";
  for (int y = 0; y < rgb.rows; ++y) f.write(reinterpret_cast<const char*>(rgb.ptr<uchar>(y)), rgb.cols * 3);
}

const std::string& checkpoint(int which) {
  // One folder per variant: 0 Qwen2-VL, 1 Qwen2.5-VL, 2 Qwen2.5-VL in the newer sharded layout.
  static std::map<int, std::unique_ptr<testing::TempDir>> dirs;
  static std::map<int, std::string> paths;
  if (!paths.count(which)) {
    auto dir = std::make_unique<testing::TempDir>();
    const std::string cmd = python_for_reference() + " " + reference_script() + " --make-random " +
                            dir->str() + " --arch " + (which == 0 ? "qwen2" : "qwen2.5") + " --seed " +
                            std::to_string(5 + which) + (which == 2 ? " --new-layout --shards 2" : "");
    if (std::system((cmd + " > /dev/null").c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    paths[which] = dir->str();
    dirs[which] = std::move(dir);
  }
  return paths[which];
}

struct BothRuns {
  at::Tensor pixels;
  std::vector<int64_t> ids;
  nlohmann::json ref;
};

// vispco and the reference on one width × height image of checkpoint `which`; checks N_v, grid and positions.
BothRuns run_both(VisionLanguageModel& m, int which, int width, int height, int seed) {
  testing::TempDir tmp;
  const auto img = testing::pattern_image(width, height, seed);
  write_ppm(tmp.path() / "img.ppm", img);
  BothRuns r{m.preprocess(img), m.prompt_ids("What colour is the cube?"), {}};
  const std::string text =
      testing::run_command(python_for_reference() + " " + reference_script() + " " + checkpoint(which) + " " +
                           tmp.str("img.ppm") + " " + testing::comma_joined(r.ids) + " 16");
  r.ref = nlohmann::json::parse(text);
  return r;
}

void compare(int which, int width, int height) {
  if (python_for_reference().empty())
    GTEST_SKIP() << "python3 with torch, regex and PIL not found (Debian: apt-get install python3-torch "
                    "python3-regex python3-pil)";
  auto m = VisionLanguageModel::load(checkpoint(which), RunContext{});
  const BothRuns r = run_both(m, which, width, height, 7 + width);
  VisualTokens vt;
  {
    c10::InferenceMode guard;
    vt = m.encode_image_list({r.pixels});
  }
  const auto grid = r.ref["grid_thw"].get<std::vector<int64_t>>();  // [t, h, w] in patches
  ASSERT_EQ(vt.layouts.size(), 1u);
  EXPECT_EQ(vt.layouts[0].n_tokens, r.ref["n_v"].get<int64_t>());
  EXPECT_EQ(vt.layouts[0].grid_rows, grid[1] / 2);
  EXPECT_EQ(vt.layouts[0].grid_cols, grid[2] / 2);

  // M-RoPE positions of the expanded prompt: get_rope_index's.
  const TokenState s = build_prefill_state(m, {{r.pixels, r.ids}}, vt.embeds, vt.layouts[0]);
  const auto want = r.ref["position_ids"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(s.positions.dim(), 3);
  ASSERT_EQ(s.positions.size(2), static_cast<int64_t>(want[0].size()));
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t t = 0; t < s.positions.size(2); ++t)
      ASSERT_EQ(s.positions[a][0][t].item<int64_t>(), want[a][t]) << "axis " << a << " token " << t;

  auto out = generate(m, {{r.pixels, r.ids}}, testing::greedy(16), nullptr, /*record_logits=*/true);
  testing::expect_matches_reference(std::to_string(width) + "×" + std::to_string(height) + ": N_v " +
                                        std::to_string(vt.layouts[0].n_tokens),
                                    r.ref, vt.embeds[0].to(at::kDouble), out);
}

// 100×60 → 56×112 px (h × w): 4 × 8 patches, 2 × 4 merged tokens (the reference's worked example).
TEST(Qwen2VlReference, Qwen2VlSmallImage) { compare(0, 100, 60); }
TEST(Qwen2VlReference, Qwen2VlWiderImage) { compare(0, 250, 180); }
// 250×180 makes 6 attention windows in Qwen2.5-VL's tower (4 × 4 merged tokens each, the last ones partial).
TEST(Qwen2VlReference, Qwen25VlWindowedImage) { compare(1, 250, 180); }
TEST(Qwen2VlReference, Qwen25VlNewerShardedLayout) { compare(2, 100, 60); }

// Two images of different sizes in one batch: each row's greedy tokens are those of its own reference run (no
// padding of visual tokens across rows: each layout is prefilled as its own group).
TEST(Qwen2VlReference, MixedSizesInOneBatch) {
  if (python_for_reference().empty()) GTEST_SKIP() << "python3 with torch, regex and PIL not found";
  auto m = VisionLanguageModel::load(checkpoint(1), RunContext{});
  const BothRuns a = run_both(m, 1, 100, 60, 3), b = run_both(m, 1, 250, 180, 4);
  const auto out = generate(m, {{a.pixels, a.ids}, {b.pixels, b.ids}}, testing::greedy(16));
  EXPECT_EQ(out.tokens[0], a.ref["greedy"].get<std::vector<int64_t>>());
  EXPECT_EQ(out.tokens[1], b.ref["greedy"].get<std::vector<int64_t>>());
  EXPECT_EQ(out.stats.row_n_visual, (std::vector<int64_t>{8, 54}));  // each request's own N_v
  EXPECT_EQ(out.stats.row_n_visual_kept, (std::vector<int64_t>{8, 54}));
}

// A pruned forward equals the reference's unpruned forward with the pruned tokens removed as keys from the
// plan's layer on, every token at its original (t, row, col) position: logits at the last prompt position and
// 16 greedy tokens, for a pre-LLM plan (DivPrune after the merger) and an in-LLM one (FastV at layer 2), on
// two images of different sizes — alone, then together in one batch.
void compare_pruned(const std::string& plan, int64_t layer) {
  if (python_for_reference().empty()) GTEST_SKIP() << "python3 with torch, regex and PIL not found";
  auto m = VisionLanguageModel::load(checkpoint(1), RunContext{});
  std::vector<VlmRequest> batch;
  std::vector<std::vector<int64_t>> want;
  for (const auto [w, h] : {std::pair{100, 60}, std::pair{250, 180}}) {
    testing::TempDir tmp;
    const auto img = testing::pattern_image(w, h, 11);
    write_ppm(tmp.path() / "img.ppm", img);
    const VlmRequest req{m.preprocess(img), m.prompt_ids("How many cubes?")};
    PlanHook hook(parse_plan(plan, m.shape()), m.shape());
    auto out = generate(m, {req}, testing::greedy(16), &hook, /*record_logits=*/true);
    const auto kept = hook.traces().back().kept[0];
    const int64_t first = std::find(req.prompt_ids.begin(), req.prompt_ids.end(), m.shape().image_token_id) -
                          req.prompt_ids.begin();
    std::vector<int64_t> masked;
    for (int64_t i = 0; i < kept.size(0); ++i)
      if (!kept[i].item<bool>()) masked.push_back(first + i);
    ASSERT_FALSE(masked.empty());
    const auto ref = nlohmann::json::parse(testing::run_command(
        python_for_reference() + " " + reference_script() + " " + checkpoint(1) + " " + tmp.str("img.ppm") +
        " " + testing::comma_joined(req.prompt_ids) + " 16 --mask-from-layer " + std::to_string(layer) +
        " --masked " + testing::comma_joined(masked)));
    const auto ref_logits = at::tensor(ref["first_logits"].get<std::vector<double>>(), at::kDouble);
    const double max_abs = (out.step_logits[0][0].to(at::kDouble) - ref_logits).abs().max().item<double>();
    std::printf("%s on %d×%d: %zu of %lld visual tokens removed, first logits max |diff| %.2e\n",
                plan.c_str(), w, h, masked.size(), static_cast<long long>(kept.size(0)), max_abs);
    EXPECT_LE(max_abs, 1e-4);
    EXPECT_EQ(out.tokens[0], ref["greedy"].get<std::vector<int64_t>>());
    batch.push_back(req);
    want.push_back(ref["greedy"].get<std::vector<int64_t>>());
  }
  PlanHook hook(parse_plan(plan, m.shape()), m.shape());
  const auto out = generate(m, batch, testing::greedy(16), &hook);
  EXPECT_EQ(out.tokens, want);
  EXPECT_EQ(out.stats.row_n_visual, (std::vector<int64_t>{8, 54}));
  EXPECT_EQ(out.stats.row_n_visual_kept, (std::vector<int64_t>{5, 5}));
}

// keep=P% keeps that share of each image's own N_v: 25 % of 8 tokens is 2, of 54 is 13.5 → 14.
TEST(Qwen2VlReference, KeepPercentResolvesPerImage) {
  if (python_for_reference().empty()) GTEST_SKIP() << "python3 with torch, regex and PIL not found";
  auto m = VisionLanguageModel::load(checkpoint(1), RunContext{});
  for (const auto [w, h, want] : {std::tuple{100, 60, 2}, std::tuple{250, 180, 14}}) {
    const VlmRequest req{m.preprocess(testing::pattern_image(w, h, 2)), m.prompt_ids("How many cubes?")};
    PlanHook hook(parse_plan("divprune:keep=25%", m.shape()), m.shape());
    GenerationConfig gc;
    gc.max_new_tokens = 1;
    const auto out = generate(m, {req}, gc, &hook);
    EXPECT_EQ(hook.traces().back().kept[0].sum().item<int64_t>(), want) << w << "×" << h;
    EXPECT_EQ(out.stats.n_visual_kept, want) << w << "×" << h;
  }
}

TEST(Qwen2VlReference, DivPruneAfterTheMergerMatchesMaskedReference) { compare_pruned("divprune:keep=5", 0); }
TEST(Qwen2VlReference, FastVInsideTheDecoderMatchesMaskedReference) {
  compare_pruned("fastv:layer=2,keep=5", 2);
}

}  // namespace
}  // namespace vispco
