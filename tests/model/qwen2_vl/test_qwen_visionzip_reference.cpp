// VisionZip on the Qwen towers, which have no [CLS] token: encode_image_list(…, true) gives the LAST ViT
// block's received attention and keys per merged token (model/qwen2_vl/vision_received.h), checked against
// the independent float64 reference's --visionzip output (tests/reference/qwen2_vl_reference.py: the full
// [H, N, N] softmax of that block, no chunking, sharing no code with vispco) on tiny random checkpoints: as
// `vispco init-random --preset tiny-qwen2-vl / tiny-qwen2.5-vl` writes them (write_random_qwen2_vl; their
// attention is nearly flat), as the reference's --make-random writes them (peaked enough to rank), and a
// Qwen2.5-VL one whose last block attends in windows. Two images of different N_v in one batch (100×60: 8
// tokens, 250×180: 54): each row's cls_attention and keys within relative error 1e-5 (fp32), the shorter row
// zero-padded. Then visionzip through generate(): with contextual=0 it keeps the top K of the reference's
// ranking, and the first logits (1e-4) and 16 greedy tokens equal the reference's forward with the other
// visual tokens removed from layer 0; with its default contextual token it runs on the mixed batch.
// Skipped with a message where /usr/bin/python3 cannot import torch, regex and PIL.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core/mat.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/json_file.h"
#include "model/generate.h"
#include "model/llava_next_model.h"
#include "model/python_reference.h"
#include "model/qwen2_vl/presets.h"
#include "model/tiny_model.h"
#include "model/vlm.h"
#include "prune/plan_hook.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

constexpr std::pair<int, int> kSizes[] = {{100, 60}, {250, 180}};  // N_v 8 (2 × 4) and 54 (6 × 9)

std::string python_for_reference() {
  const auto py = testing::python_with_torch();
  if (py.empty() || std::system((py + " -c 'import regex, PIL' > /dev/null 2>&1").c_str()) != 0) return "";
  return py;
}

std::string reference_script() {
  return (fs::path(::vispco::testing::source_dir()) / "tests/reference/qwen2_vl_reference.py").string();
}

void write_ppm(const fs::path& p, const cv::Mat& rgb) {
  std::ofstream f(p, std::ios::binary);
  f << "P6\n" << rgb.cols << " " << rgb.rows << "\n255\n";
  for (int y = 0; y < rgb.rows; ++y) f.write(reinterpret_cast<const char*>(rgb.ptr<uchar>(y)), rgb.cols * 3);
}

// Where a test checkpoint comes from: an init-random preset ("tiny-qwen2-vl", "tiny-qwen2.5-vl"; normal(0,
// 0.02) weights, whose last-block attention is nearly flat: received attention within 0.2 % of its mean) or
// the reference's --make-random ("qwen2", "qwen2.5"; weights of std 1/√fan_in, attention peaked enough to
// rank: std/mean of the received attention 0.08 to 0.4).
struct Source {
  std::string name;
  bool windowed_last =
      false;  ///< config.json's fullatt_block_indexes set to [1]: the last block (3) windowed
  bool preset() const { return name.rfind("tiny-", 0) == 0; }
  std::string label() const { return name + (windowed_last ? " (last block windowed)" : ""); }
};

// The checkpoint of `src` (seed 17), written once per source.
std::string checkpoint(const Source& src) {
  static std::map<std::string, std::unique_ptr<testing::TempDir>> dirs;
  auto& dir = dirs[src.label()];
  if (!dir) {
    dir = std::make_unique<testing::TempDir>();
    if (src.preset()) {
      write_random_qwen2_vl(dir->str(), find_qwen2_vl_preset(src.name).config, 17, c10::kFloat);
    } else {
      const std::string make = python_for_reference() + " " + reference_script() + " --make-random " +
                               dir->str() + " --arch " + src.name + " --seed 17 > /dev/null";
      if (std::system(make.c_str()) != 0) throw std::runtime_error("failed: " + make);
    }
    if (src.windowed_last) {
      const auto path = dir->path() / "config.json";
      auto config = read_json_file(path.string(), "config");
      config["vision_config"]["fullatt_block_indexes"] = {1};
      std::ofstream(path) << config.dump(2);
    }
  }
  return dir->str();
}

nlohmann::json run_reference(const std::string& model, const std::string& ppm,
                             const std::vector<int64_t>& ids, const std::string& rest) {
  const auto text = testing::run_command(python_for_reference() + " " + reference_script() + " " + model +
                                         " " + ppm + " " + testing::comma_joined(ids) + " " + rest);
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception&) {
    ADD_FAILURE() << "reference output: " << text.substr(0, 400);
    throw;
  }
}

at::Tensor doubles(const nlohmann::json& j) { return at::tensor(j.get<std::vector<double>>(), at::kDouble); }

at::Tensor matrix(const nlohmann::json& rows) {
  std::vector<at::Tensor> r;
  for (const auto& row : rows) r.push_back(doubles(row));
  return at::stack(r);
}

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).norm() / want.norm()).item<double>();
}

void expect_signal_matches(const Source& src) {
  if (python_for_reference().empty())
    GTEST_SKIP() << "python3 with torch, regex and PIL not found (Debian: apt-get install python3-torch "
                    "python3-regex python3-pil)";
  const auto model = checkpoint(src);
  auto m = VisionLanguageModel::load(model, RunContext{});
  const auto ids = m.prompt_ids("What is there?");
  testing::TempDir tmp;
  std::vector<at::Tensor> pixels;
  std::vector<nlohmann::json> refs;
  for (const auto [w, h] : kSizes) {
    const auto img = testing::pattern_image(w, h, w + h);
    const auto ppm = tmp.str(std::to_string(w) + ".ppm");
    write_ppm(ppm, img);
    pixels.push_back(m.preprocess(img));
    refs.push_back(run_reference(model, ppm, ids, "1 --visionzip"));
  }
  VisualTokens vt, alone;
  {
    c10::InferenceMode guard;
    vt = m.encode_image_list(pixels, /*want_cls_attention=*/true);
    alone = m.encode_image_list({pixels[0]}, true);
  }
  ASSERT_TRUE(vt.cls_attention.defined() && vt.keys.defined());
  EXPECT_EQ(vt.cls_attention.scalar_type(), at::kFloat);
  ASSERT_EQ(vt.cls_attention.sizes(), (at::IntArrayRef{2, 54}));
  ASSERT_EQ(vt.keys.sizes(), (at::IntArrayRef{2, 54, m.shape().vision_hidden_size}));
  for (int64_t b = 0; b < 2; ++b) {
    const auto& ref = refs[size_t(b)];
    const int64_t n = ref["n_v"].get<int64_t>();
    const auto row = vt.row(b, m.shape());
    ASSERT_EQ(row.cls_attention.size(1), n);
    const auto want_r = doubles(ref["visionzip_received"]), want_k = matrix(ref["visionzip_keys"]);
    ASSERT_EQ(want_k.sizes(), row.keys[0].sizes());
    const double rel_r = relative_error(row.cls_attention[0], want_r),
                 rel_k = relative_error(row.keys[0], want_k);
    // How far the signal is from flat: the peaked checkpoints test a ranking, not a constant.
    const double spread = (want_r.std() / want_r.mean()).item<double>();
    std::printf("%s, %s: N_v %lld, received attention relative error %.2e (std/mean %.4f), keys %.2e\n",
                src.label().c_str(), b == 0 ? "100×60" : "250×180", static_cast<long long>(n), rel_r, spread,
                rel_k);
    EXPECT_LE(rel_r, 1e-5);
    EXPECT_LE(rel_k, 1e-5);
    if (!src.preset()) EXPECT_GT(spread, 0.05);
    EXPECT_TRUE(vt.cls_attention[b].narrow(0, n, 54 - n).eq(0).all().item<bool>());  // padding
    EXPECT_TRUE(vt.keys[b].narrow(0, n, 54 - n).eq(0).all().item<bool>());
  }
  // A row does not depend on the batch it was encoded in.
  EXPECT_TRUE(alone.cls_attention.equal(vt.row(0, m.shape()).cls_attention));
  EXPECT_TRUE(alone.keys.equal(vt.row(0, m.shape()).keys));
}

TEST(QwenVisionZipReference, Qwen2VlPresetSignalMatchesTheFloat64Reference) {
  expect_signal_matches({"tiny-qwen2-vl"});
}
// The preset's last block (3) is a full-attention one (fullatt_block_indexes {1, 3}), as in the published
// Qwen2.5-VL configs.
TEST(QwenVisionZipReference, Qwen25VlPresetSignalMatchesTheFloat64Reference) {
  expect_signal_matches({"tiny-qwen2.5-vl"});
}
TEST(QwenVisionZipReference, Qwen2VlPeakedSignalMatchesTheFloat64Reference) {
  expect_signal_matches({"qwen2"});
}
TEST(QwenVisionZipReference, Qwen25VlPeakedSignalMatchesTheFloat64Reference) {
  expect_signal_matches({"qwen2.5"});
}
// Last block windowed: each patch's received attention is over its window's queries (6 windows at 250×180).
TEST(QwenVisionZipReference, Qwen25VlWindowedLastBlockMatchesTheFloat64Reference) {
  expect_signal_matches({"qwen2.5", true});
}

// visionzip:keep=5,contextual=0 keeps the 5 tokens the reference ranks highest, and decodes as the reference
// with the other visual tokens removed from layer 0; alone and in one batch of both sizes. With the default
// contextual token (keep=6: 5 dominant + 1 merged) the mixed batch keeps 6 of each image's tokens.
void expect_visionzip_matches_masked_reference(const Source& src) {
  if (python_for_reference().empty()) GTEST_SKIP() << "python3 with torch, regex and PIL not found";
  const auto model = checkpoint(src);
  const std::string preset = src.label();
  auto m = VisionLanguageModel::load(model, RunContext{});
  const int64_t K = 5;
  const std::string plan = "visionzip:keep=5,contextual=0";
  testing::TempDir tmp;
  std::vector<VlmRequest> batch;
  std::vector<std::vector<int64_t>> want;
  for (const auto [w, h] : kSizes) {
    const auto img = testing::pattern_image(w, h, 3 * w);
    const auto ppm = tmp.str(std::to_string(w) + ".ppm");
    write_ppm(ppm, img);
    const VlmRequest req{m.preprocess(img), m.prompt_ids("How many cubes?")};
    const auto ranked = run_reference(model, ppm, req.prompt_ids, "1 --visionzip");
    const auto received = doubles(ranked["visionzip_received"]);
    const auto order = std::get<1>(received.sort(0, /*descending=*/true));
    const auto top = std::get<0>(order.narrow(0, 0, K).sort());  // the reference's top K, ascending
    const double gap =
        (received[order[K - 1]] - received[order[K]]).item<double>() / received.max().item<double>();

    PlanHook hook(parse_plan(plan, m.shape()), m.shape());
    const auto out = generate(m, {req}, testing::greedy(16), &hook, /*record_logits=*/true);
    const auto kept = at::nonzero(hook.traces().back().kept[0].cpu()).squeeze(1);
    EXPECT_TRUE(kept.equal(top)) << preset << " " << w << "×" << h << ": kept " << kept << " reference top "
                                 << top;
    const int64_t first = std::find(req.prompt_ids.begin(), req.prompt_ids.end(), m.shape().image_token_id) -
                          req.prompt_ids.begin();
    std::vector<int64_t> masked;
    for (int64_t i = 0; i < received.size(0); ++i)
      if (!(top == i).any().item<bool>()) masked.push_back(first + i);
    const auto ref = run_reference(model, ppm, req.prompt_ids,
                                   "16 --mask-from-layer 0 --masked " + testing::comma_joined(masked));
    const double max_abs =
        (out.step_logits[0][0].to(at::kDouble) - doubles(ref["first_logits"])).abs().max().item<double>();
    std::printf(
        "%s %s on %d×%d: kept the reference's top %lld of %lld (gap to the next %.1e of the max), "
        "first logits max |diff| %.2e\n",
        preset.c_str(), plan.c_str(), w, h, static_cast<long long>(K),
        static_cast<long long>(received.size(0)), gap, max_abs);
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

  PlanHook merging(parse_plan("visionzip:keep=6", m.shape()), m.shape());
  const auto merged = generate(m, batch, testing::greedy(2), &merging);
  EXPECT_EQ(merged.stats.row_n_visual_kept, (std::vector<int64_t>{6, 6}));
}

TEST(QwenVisionZipReference, Qwen2VlPresetVisionZipKeepsTheReferencesTopTokens) {
  expect_visionzip_matches_masked_reference({"tiny-qwen2-vl"});
}
TEST(QwenVisionZipReference, Qwen25VlPresetVisionZipKeepsTheReferencesTopTokens) {
  expect_visionzip_matches_masked_reference({"tiny-qwen2.5-vl"});
}
TEST(QwenVisionZipReference, Qwen2VlPeakedVisionZipKeepsTheReferencesTopTokens) {
  expect_visionzip_matches_masked_reference({"qwen2"});
}
TEST(QwenVisionZipReference, Qwen25VlPeakedVisionZipKeepsTheReferencesTopTokens) {
  expect_visionzip_matches_masked_reference({"qwen2.5"});
}

}  // namespace
}  // namespace vispco
