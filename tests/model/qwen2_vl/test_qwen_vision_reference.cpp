// vispco's Qwen2-VL / Qwen2.5-VL image processor and vision tower against the independent float64 reference
// (tests/reference/qwen2_vl_reference.py, transformers v4.55 semantics, sharing no code with vispco) on tiny
// random checkpoints the reference writes (--make-random): Qwen2-VL in the published key layout (visual.*),
// Qwen2.5-VL in both (visual.* and model.visual.*), images of 100×60 (one window) and 250×180 (six windows,
// partial ones at the right and bottom). Compared: pixel_values (max |diff| ≤ 1e-6), the grid, N_v, and the
// image embeddings (relative error ≤ 1e-5 in fp32); bf16 within 3e-2 of the same. Skipped with a message
// where /usr/bin/python3 cannot import torch, regex and PIL.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "core/context.h"
#include "core/json_file.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "model/python_reference.h"
#include "model/qwen2_vl/image_processor.h"
#include "model/qwen2_vl/vision.h"
#include "model/weights.h"
#include "test_paths.h"
#include "test_util.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

const char* kPython = "/usr/bin/python3";

bool reference_available() {
  return std::system((std::string(kPython) + " -c 'import torch, regex, PIL' >/dev/null 2>&1").c_str()) == 0;
}

std::string reference_script() {
  return (fs::path(::vispco::testing::source_dir()) / "tests" / "reference" / "qwen2_vl_reference.py")
      .string();
}

// A deterministic RGB picture: gradients plus a small LCG noise, so a resize mixes distinct values.
cv::Mat test_image(int width, int height, uint32_t seed) {
  cv::Mat img(height, width, CV_8UC3);
  uint32_t state = seed;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      auto& px = img.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) {
        state = state * 1664525u + 1013904223u;
        const int base = c == 0 ? x * 255 / (width - 1) : c == 1 ? y * 255 / (height - 1) : (x + y) % 256;
        px[c] = static_cast<uchar>((base + int(state >> 26)) % 256);
      }
    }
  return img;
}

void write_ppm(const fs::path& p, const cv::Mat& rgb) {
  std::ofstream f(p, std::ios::binary);
  f << "P6\n" << rgb.cols << " " << rgb.rows << "\n255\n";
  for (int y = 0; y < rgb.rows; ++y) f.write(reinterpret_cast<const char*>(rgb.ptr<uchar>(y)), rgb.cols * 3);
}

at::Tensor matrix_of(const nlohmann::json& rows) {
  const auto v = rows.get<std::vector<std::vector<double>>>();
  auto t = at::empty({int64_t(v.size()), v.empty() ? 0 : int64_t(v[0].size())}, at::kDouble);
  for (size_t i = 0; i < v.size(); ++i) t[int64_t(i)] = at::tensor(v[i], at::kDouble);
  return t;
}

// The tower of a random checkpoint, loaded from its visual.* / model.visual.* tensors.
Qwen2VisionTransformer load_tower(const std::string& dir, const Qwen2VisionConfig& cfg,
                                  c10::ScalarType dtype) {
  RunContext ctx;
  ctx.dtype = dtype;
  auto tower = construct_for_loading<Qwen2VisionTransformer>(cfg, dtype);
  const auto ckpt = io::CheckpointTensors::open_dir(dir);
  at::NoGradGuard no_grad;
  TensorSource ts{ckpt.dir(), [&](const std::string& k) { return ckpt.contains(k); },
                  [&](const std::string& k) { return ckpt.tensor(k); }, ckpt.names().size(), nullptr};
  load_weights(*tower, ts, ctx, qwen_visual_checkpoint_keys);
  return tower;
}

void compare(const std::string& arch, bool new_layout) {
  if (!reference_available())
    GTEST_SKIP() << kPython << " cannot import torch, regex and PIL (Debian: apt-get install python3-torch "
                 << "python3-regex python3-pil)";
  testing::TempDir tmp;
  const std::string model = tmp.str("model");
  const std::string make = std::string(kPython) + " " + reference_script() + " --make-random " + model +
                           " --arch " + arch + " --seed 11" + (new_layout ? " --new-layout" : "");
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const auto config = read_json_file(model + "/config.json", "config");
  const bool qwen25 = arch == "qwen2.5";
  const auto vcfg = qwen2_vision_config_from_json(config["vision_config"], qwen25);
  const auto pre = load_qwen_image_processor_config(model, vcfg);
  auto tower = load_tower(model, vcfg, at::kFloat);
  auto tower_bf16 = load_tower(model, vcfg, at::kBFloat16);

  for (const auto& [w, h] : {std::pair{100, 60}, std::pair{250, 180}}) {
    const std::string label = arch + (new_layout ? " (model.visual.*)" : " (visual.*)") + ", " +
                              std::to_string(w) + "×" + std::to_string(h);
    const auto ppm = tmp.str(std::to_string(w) + "x" + std::to_string(h) + ".ppm");
    write_ppm(ppm, test_image(w, h, uint32_t(w * 1000 + h)));
    const auto px = qwen_preprocess(io::load_image_rgb(ppm), pre);
    at::Tensor embeds, embeds_bf16;
    {
      c10::InferenceMode guard;
      embeds = tower->forward(px.pixel_values, px.grid_t, px.grid_h, px.grid_w).to(at::kDouble);
      embeds_bf16 = tower_bf16->forward(px.pixel_values, px.grid_t, px.grid_h, px.grid_w).to(at::kDouble);
    }
    const auto text = testing::run_command(std::string(kPython) + " " + reference_script() + " " + model +
                                           " " + ppm + " 859,862,860 1 --pixels");
    nlohmann::json ref;
    ASSERT_NO_THROW(ref = nlohmann::json::parse(text)) << text.substr(0, 400);
    EXPECT_EQ(ref["grid_thw"].get<std::vector<int64_t>>(),
              (std::vector<int64_t>{px.grid_t, px.grid_h, px.grid_w}));
    const int64_t n_v = px.n_visual_tokens(vcfg.spatial_merge_size);
    EXPECT_EQ(ref["n_v"].get<int64_t>(), n_v);
    ASSERT_EQ(embeds.size(0), n_v);
    EXPECT_EQ(embeds.size(1), vcfg.out_hidden_size);
    const auto ref_px = matrix_of(ref["pixel_values"]);
    ASSERT_EQ(ref_px.sizes(), px.pixel_values.sizes());
    const double px_diff = (px.pixel_values.to(at::kDouble) - ref_px).abs().max().item<double>();
    const auto ref_emb = matrix_of(ref["image_embeds"]);
    ASSERT_EQ(ref_emb.sizes(), embeds.sizes());
    const double rel = ((embeds - ref_emb).norm() / ref_emb.norm()).item<double>();
    const double max_abs = (embeds - ref_emb).abs().max().item<double>();
    const double rel_bf16 = ((embeds_bf16 - ref_emb).norm() / ref_emb.norm()).item<double>();
    std::printf(
        "%s: grid %lldx%lldx%lld, N_v %lld, pixel_values max |diff| %.2e, image_embeds relative error "
        "%.2e (max |diff| %.2e), bf16 relative error %.2e\n",
        label.c_str(), (long long)px.grid_t, (long long)px.grid_h, (long long)px.grid_w, (long long)n_v,
        px_diff, rel, max_abs, rel_bf16);
    EXPECT_LE(px_diff, 1e-6) << label;
    EXPECT_LE(rel, 1e-5) << label;
    EXPECT_LE(rel_bf16, 3e-2) << label;
  }
}

TEST(QwenVisionReference, Qwen2VlMatchesTheFloat64Reference) { compare("qwen2", false); }
TEST(QwenVisionReference, Qwen25VlMatchesTheFloat64Reference) { compare("qwen2.5", false); }
TEST(QwenVisionReference, Qwen25VlNewKeyLayoutMatchesTheFloat64Reference) { compare("qwen2.5", true); }

}  // namespace
}  // namespace vispco
