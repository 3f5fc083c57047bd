// The LLaVA-NeXT family end to end on the tiny random model: the registry row and shape, the processor's
// tiles (checked against the AnyRes geometry and CLIP normalisation by hand), encoding (each image's tokens
// equal the tower + projector of its pictures packed as transformers' tensor operations pack them), both
// checkpoint key layouts, bf16 pixels, and a batch mixing aspect ratios generating what each image gets
// alone.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/image_processor.h"
#include "model/llava_next/llava_next.h"
#include "model/llava_next_model.h"
#include "model/tiny_model.h"
#include "prune/plan.h"
#include "prune/plan_hook.h"

namespace vispco {
namespace {

namespace fs = std::filesystem;

LlavaNextConfig tiny_cfg() { return find_llava_next_preset("tiny-next").config; }

LlavaNextModel& next_of(VisionLanguageModel& m) { return dynamic_cast<LlavaNextModel&>(m.family()); }

TEST(LlavaNext, TheRegistryReadsItsFolders) {
  const auto s = load_model_shape(testing::tiny_next_dir());
  EXPECT_EQ(s.architecture, "LlavaNextForConditionalGeneration");
  EXPECT_EQ(s.n_visual_tokens, 88);  // 112×112: 16 + 8·9
  EXPECT_EQ(s.default_layout(), (VisualLayout{88, 8, 9}));
  auto m = testing::load_tiny_next();
  EXPECT_EQ(m.shape(), s);
  // The tiny LLaVA preset's tower through 1 + 4 pictures.
  const auto one = load_model_shape(testing::tiny_model_dir()).flops;
  EXPECT_EQ(s.flops.vision_layers, 5 * one.vision_layers);
  EXPECT_EQ(s.flops.projector, 5 * one.projector);
}

TEST(LlavaNext, PreprocessCutsTilesOfTheCanvas) {
  auto m = testing::load_tiny_next();
  const auto& pre = m.preprocess_config();
  // 60×50 → canvas 56×112 (image resized to 68×56 at columns [22, 90)), 2 tiles; pixels [1 + 2 + 1, 3, 56,
  // 56].
  const auto img = testing::pattern_image(60, 50, 1);
  const auto px = m.preprocess(img);
  ASSERT_EQ(px.sizes(), (at::IntArrayRef{4, 3, 56, 56}));
  const auto im = anyres_images(img, tiny_cfg());
  // Each slice is (x/255 − mean)/std of its picture: the base, then the canvas' left and right halves.
  auto normalised = [&](const cv::Mat& rgb) {
    at::Tensor t = at::empty({3, rgb.rows, rgb.cols}, at::kFloat);
    for (int y = 0; y < rgb.rows; ++y)
      for (int x = 0; x < rgb.cols; ++x)
        for (int c = 0; c < 3; ++c)
          t[c][y][x] = (rgb.at<cv::Vec3b>(y, x)[c] / 255.0f - pre.mean[c]) / pre.std[c];
    return t;
  };
  EXPECT_LT(testing::max_diff(px[0], normalised(im.base)), 1e-6);
  EXPECT_LT(testing::max_diff(px[1], normalised(im.canvas(cv::Rect(0, 0, 56, 56)))), 1e-6);
  EXPECT_LT(testing::max_diff(px[2], normalised(im.canvas(cv::Rect(56, 0, 56, 56)))), 1e-6);
  // Padding is black before normalisation: tile 0's columns [0, 22) and tile 1's [34, 56) hold −mean/std.
  for (int c = 0; c < 3; ++c) {
    const float pad = -pre.mean[c] / pre.std[c];
    EXPECT_TRUE(at::allclose(px[1][c].narrow(1, 0, 22), at::full({56, 22}, pad)));
    EXPECT_TRUE(at::allclose(px[2][c].narrow(1, 34, 22), at::full({56, 22}, pad)));
  }
  EXPECT_EQ(decode_image_size_slice(px[3]), std::make_pair(int64_t{50}, int64_t{60}));
  // A 100×100 image makes 4 tiles; a 112×56 one 2 with no padding (tile 1 = the image's right half).
  EXPECT_EQ(m.preprocess(testing::pattern_image(100, 100, 2)).size(0), 6);
  const auto wide = testing::pattern_image(112, 56, 3);
  const auto pw = m.preprocess(wide);
  ASSERT_EQ(pw.size(0), 4);
  EXPECT_LT(testing::max_diff(pw[2], normalised(wide(cv::Rect(56, 0, 56, 56)))), 1e-6);
}

// transformers' pack_image_features with its tensor operations (view, permute, flatten, slice, cat).
at::Tensor pack_like_transformers(const at::Tensor& f, const at::Tensor& newline, const AnyresGeometry& g) {
  const int64_t n = g.grid, C = f.size(2);
  auto x = f.narrow(0, 1, g.n_tiles()).reshape({g.tile_rows, g.tile_cols, n, n, C});
  x = x.permute({4, 0, 2, 1, 3}).flatten(1, 2).flatten(2, 3);
  x = x.narrow(1, g.unpad.row0, g.unpad.n_rows).narrow(2, g.unpad.col0, g.unpad.n_cols);
  x = at::cat({x, newline.view({C, 1, 1}).expand({C, x.size(1), 1})}, 2);
  return at::cat({f[0], x.flatten(1, 2).transpose(0, 1)}, 0);
}

TEST(LlavaNext, EachImageMakesItsOwnLayout) {
  auto m = testing::load_tiny_next();
  auto& fam = next_of(m);
  c10::InferenceMode guard;
  const std::vector<std::pair<int, int>> sizes = {{60, 50}, {15, 100}, {100, 100}, {112, 56}};
  std::vector<at::Tensor> px;
  for (size_t i = 0; i < sizes.size(); ++i)
    px.push_back(m.preprocess(testing::pattern_image(sizes[i].first, sizes[i].second, int(i))));
  const auto vt = m.encode_image_list(px, /*want_cls_attention=*/true);
  ASSERT_EQ(vt.layouts.size(), 4u);
  // Hand-worked in test_llava_next_anyres.cpp: 36 (4 × (4 + 1)), 40 (8 × (2 + 1)), 88, 52.
  EXPECT_EQ(vt.layouts[0], (VisualLayout{36, 4, 5}));
  EXPECT_EQ(vt.layouts[1], (VisualLayout{40, 8, 3}));
  EXPECT_EQ(vt.layouts[2], (VisualLayout{88, 8, 9}));
  EXPECT_EQ(vt.layouts[3], (VisualLayout{52, 4, 9}));
  EXPECT_EQ(vt.embeds.sizes(), (at::IntArrayRef{4, 88, 64}));
  auto& net = fam.net();
  for (size_t b = 0; b < sizes.size(); ++b) {
    const auto g = anyres_geometry(sizes[b].second, sizes[b].first, tiny_cfg());
    // Every picture through the tower alone (LLaVA's tower tokens), projected, packed the transformers way.
    const auto pics = px[b].narrow(0, 0, 1 + g.n_tiles());
    const auto tower = llava_tower_tokens(net->vision_tower, tiny_cfg().llava, pics, true);
    const auto want =
        pack_like_transformers(net->multi_modal_projector->forward(tower.embeds), net->image_newline, g);
    const auto row = vt.row(int64_t(b), m.shape());
    EXPECT_LT(testing::max_diff(row.embeds[0], want), 1e-5) << b;
    // Before the LLM a newline token has no [CLS] attention and a zero key.
    const auto want_cls = pack_like_transformers(tower.cls_attention.unsqueeze(-1), at::zeros({1}), g);
    EXPECT_LT(testing::max_diff(row.cls_attention[0], want_cls.squeeze(-1)), 1e-7) << b;
    const int64_t newline = 16 + g.unpad.n_cols;  // the first row's newline
    EXPECT_EQ(row.cls_attention[0][newline].item<float>(), 0.0f);
    EXPECT_TRUE(at::equal(row.keys[0][newline], at::zeros({32})));
    if (b != 2)
      EXPECT_TRUE(at::equal(vt.embeds[int64_t(b)].narrow(0, g.n_tokens(), 88 - g.n_tokens()),
                            at::zeros({88 - g.n_tokens(), 64})));
  }
  // The batched entry point takes images of one tile count.
  const auto two = m.encode_images(at::stack({px[0], px[3]}));
  EXPECT_LT(testing::max_diff(two.row(1, m.shape()).embeds, vt.row(3, m.shape()).embeds), 1e-6);
}

TEST(LlavaNext, RefusesPixelsItDidNotMake) {
  auto m = testing::load_tiny_next();
  c10::InferenceMode guard;
  // LLaVA-1.5 pixels (no tiles, no size slice), and a 60×50 image's pixels with a tile missing.
  EXPECT_THROW(m.encode_image_list({testing::test_pixels(56, 1)}), InvalidArgument);
  const auto px = m.preprocess(testing::pattern_image(60, 50, 1));
  EXPECT_THROW(m.encode_image_list({at::cat({px.narrow(0, 0, 2), px.narrow(0, 3, 1)})}), InvalidArgument);
  EXPECT_THROW(m.encode_image_list({px.narrow(0, 0, 3)}), InvalidArgument);  // the size slice cut off
}

TEST(LlavaNext, Bf16PixelsKeepTheImageSize) {
  auto m = testing::load_tiny_next(at::kBFloat16);
  c10::InferenceMode guard;
  // A 333-px side is no bf16 number (its neighbours are 332 and 334): the digits carry it exactly, so the
  // tiles and the layout are those of 333×97.
  const auto img = testing::pattern_image(333, 97, 5);
  const auto vt = m.encode_image_list({m.preprocess(img)});
  ASSERT_EQ(vt.layouts.size(), 1u);
  EXPECT_EQ(vt.layouts[0], anyres_geometry(97, 333, tiny_cfg()).layout());
  EXPECT_EQ(vt.embeds.scalar_type(), at::kBFloat16);
}

TEST(LlavaNext, LoadsTheNewerCheckpointLayout) {
  // transformers ≥ 4.52 saves model.vision_tower.…, model.multi_modal_projector.…, model.image_newline,
  // model.language_model.… and lm_head.…; the folder loads to the same network.
  testing::TempDir tmp;
  const fs::path src = testing::tiny_next_dir(), dst = tmp.path() / "new";
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), dst / e.path().filename());
  auto ckpt = io::CheckpointTensors::open_dir(src.string());
  std::map<std::string, at::Tensor> renamed;
  for (const auto& name : ckpt.names()) {
    renamed[testing::newer_layout_key(name)] = ckpt.tensor(name).clone();
  }
  ASSERT_TRUE(renamed.count("model.image_newline"));
  io::save_safetensors((dst / "model.safetensors").string(), renamed, {{"format", "pt"}});
  auto a = testing::load_tiny_next();
  auto b = VisionLanguageModel::load(dst.string(), RunContext{});
  c10::InferenceMode guard;
  const auto px = a.preprocess(testing::pattern_image(60, 50, 4));
  EXPECT_TRUE(at::equal(a.encode_image_list({px}).embeds, b.encode_image_list({px}).embeds));
  EXPECT_TRUE(at::equal(next_of(a).net()->image_newline, next_of(b).net()->image_newline));
}

TEST(LlavaNext, AMixedBatchGeneratesWhatEachImageGetsAlone) {
  auto m = testing::load_tiny_next();
  const std::vector<std::pair<int, int>> sizes = {{60, 50}, {100, 100}, {15, 100}, {112, 56}, {60, 50}};
  const std::vector<std::string> questions = {"What colour is the cube?", "How many spheres are there?",
                                              "Is there a red ring?", "What shape is the blue object?",
                                              "What does the text say?"};
  std::vector<VlmRequest> reqs;
  for (size_t i = 0; i < sizes.size(); ++i)
    reqs.push_back({m.preprocess(testing::pattern_image(sizes[i].first, sizes[i].second, 10 + int(i))),
                    m.prompt_ids(questions[i])});
  GenerationConfig gc;
  gc.max_new_tokens = 5;
  gc.stop_at_eos = false;
  const std::vector<int64_t> n_v = {36, 88, 40, 52, 36};
  for (const std::string plan : {"none", "divprune:keep=20", "fastv:layer=2,keep=10"}) {
    PlanHook batched(parse_plan(plan, m.shape()), m.shape());
    const auto all = generate(m, reqs, gc, batched.plan().empty() ? nullptr : &batched);
    EXPECT_EQ(all.stats.n_visual, 88) << plan;
    for (size_t i = 0; i < reqs.size(); ++i) {
      PlanHook alone(parse_plan(plan, m.shape()), m.shape());
      const auto one = generate(m, {reqs[i]}, gc, alone.plan().empty() ? nullptr : &alone);
      EXPECT_EQ(all.tokens[i], one.tokens[0]) << plan << " row " << i;
      EXPECT_EQ(one.stats.n_visual, n_v[i]) << plan << " row " << i;
      const int64_t kept = plan == "none" ? n_v[i] : plan == "divprune:keep=20" ? 20 : 10;
      EXPECT_EQ(one.stats.n_visual_kept, kept) << plan << " row " << i;
    }
  }
}

TEST(LlavaNext, InitRandomWritesALoadableFolder) {
  testing::TempDir tmp;
  const auto r =
      testing::run_cli("init-random --preset tiny-next --dtype fp32 --seed 3 --out " + tmp.str("m"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("N_v ≤ 88"), std::string::npos) << r.out;
  EXPECT_EQ(load_model_shape(tmp.str("m")).architecture, "LlavaNextForConditionalGeneration");
  EXPECT_TRUE(fs::exists(tmp.path() / "m" / "tokenizer.model"));
  const auto pre = nlohmann::json::parse(testing::read_file(tmp.path() / "m" / "preprocessor_config.json"));
  EXPECT_EQ(pre["image_processor_type"], "LlavaNextImageProcessor");
}

}  // namespace
}  // namespace vispco
