// Tests of SynthVQA-HR: every answer re-derived from the stored scene by logic written here; canvases, tiles
// and overlaps checked from the record; glyph heights and object footprints measured in rendered pixels (by
// rendering a scene with and without an item) at full resolution and in a 336×336 base view made here with
// cv::resize; balance, determinism, splits, CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "eval/synthvqa/generator.h"
#include "eval/synthvqa/hr_generator.h"
#include "eval/synthvqa/render.h"
#include "eval/synthvqa/rng.h"
#include "eval/synthvqa/scene.h"
#include "eval/synthvqa/splits.h"
#include "eval/synthvqa_checks.h"
#include "eval/temp_dir.h"
#include "test_paths.h"

namespace vispco::eval::synthvqa {
namespace {

using nlohmann::json;
constexpr uint64_t kSeed = 321;
constexpr size_t kN = 280;  // 40 per family
constexpr int kTile = 336;  // LLaVA-NeXT tile and base-view side (pixels)

const std::vector<SynthSample>& samples() {
  static const std::vector<SynthSample> s = make_samples(make_hr_sample, kSeed, kN);
  return s;
}

// ---- Independent re-derivation: reads the written JSON record only. ----

std::vector<json> objects_where(const json& scene, const std::string& size, const std::string& colour,
                                const std::string& shape) {
  std::vector<json> out;
  for (const json& o : scene["objects"])
    if (o["size"] == size && (colour.empty() || o["color"] == colour) &&
        (shape.empty() || o["shape"] == shape))
      out.push_back(o);
  return out;
}

json unique_object(const json& scene, const std::string& size, const std::string& colour,
                   const std::string& shape) {
  const auto found = objects_where(scene, size, colour, shape);
  EXPECT_EQ(found.size(), 1u) << size << " " << colour << " " << shape << " is not unique in "
                              << scene.dump();
  return found.empty() ? json() : found[0];
}

std::string derive_answer(const json& rec) {
  const std::string q = rec["question"], family = rec["family"];
  const json& scene = rec["scene"];
  std::smatch m;
  const std::regex color_q(R"(What color is the (large|tiny) (\w+)\?)");
  const std::regex shape_q(R"(What shape is the (large|tiny) (\w+) object\?)");
  if ((family == "large_color" || family == "tiny_color") && std::regex_match(q, m, color_q) &&
      family == m[1].str() + "_color")
    return unique_object(scene, m[1], "", m[2])["color"];
  if ((family == "large_shape" || family == "tiny_shape") && std::regex_match(q, m, shape_q) &&
      family == m[1].str() + "_shape")
    return unique_object(scene, m[1], m[2], "")["shape"];
  if (family == "large_count" &&
      std::regex_match(q, m, std::regex(R"(How many large (\w+) objects are there\?)")))
    return std::to_string(objects_where(scene, "large", m[1], "").size());
  if (family == "tiny_count" && std::regex_match(q, m, std::regex(R"(How many tiny (\w+) are there\?)")))
    return std::to_string(objects_where(scene, "tiny", "", singular(m[1])).size());
  if (family == "text" && std::regex_match(q, m, std::regex(R"(What does the (?:(\w+) )?text say\?)")))
    return text_answer(scene, m[1], q);
  ADD_FAILURE() << "question does not match its family's template: " << family << ": " << q;
  return "";
}

TEST(SynthVqaHr, EveryAnswerMatchesIndependentDerivation) {
  expect_answers_derived(samples(), derive_answer);
  for (const SynthSample& s : samples()) {
    if (s.family != "tiny_color") continue;  // the base view sees tiny dots of distinct colours only
    const json scene = s.record()["scene"];
    std::set<std::string> colours;
    for (const json& o : objects_where(scene, "tiny", "", "")) colours.insert(o["color"]);
    EXPECT_EQ(colours.size(), objects_where(scene, "tiny", "", "").size()) << s.id;
  }
}

// Whether the closed pixel interval [lo, hi] keeps 3 px from every tile line (multiples of 336).
bool in_one_tile(int lo, int hi) { return lo - 3 >= 0 && (lo - 3) / kTile == (hi + 3) / kTile; }

TEST(SynthVqaHr, ScenesUseThePinpointCanvasesAndKeepTinyThingsInsideOneTile) {
  const std::set<std::pair<int, int>> canvases{{672, 672}, {672, 336}, {336, 672}, {1008, 336}, {336, 1008}};
  for (const SynthSample& s : samples()) {
    const json scene = s.record()["scene"];
    const int w = scene["width"], h = scene["height"];
    EXPECT_TRUE(canvases.count({w, h})) << s.id << " is " << w << "x" << h;
    ASSERT_EQ(s.rgb.cols, w);
    ASSERT_EQ(s.rgb.rows, h);
    ASSERT_EQ(s.rgb.type(), CV_8UC3);
    const auto& objs = scene["objects"];
    const size_t n_tiny = objects_where(scene, "tiny", "", "").size();
    const size_t n_large = objects_where(scene, "large", "", "").size();
    EXPECT_EQ(n_tiny + n_large, objs.size()) << s.id;
    EXPECT_TRUE(n_large >= 4 && n_large <= 6) << s.id;
    EXPECT_TRUE(n_tiny >= 5 && n_tiny <= 8) << s.id;
    for (size_t i = 0; i < objs.size(); ++i) {
      const int x = objs[i]["x"], y = objs[i]["y"], r = objs[i]["radius"];
      if (objs[i]["size"] == "tiny") {
        EXPECT_TRUE(r >= 6 && r <= 8) << s.id;
        EXPECT_TRUE(in_one_tile(x - r, x + r) && in_one_tile(y - r, y + r)) << s.id << " object " << i;
      } else {
        EXPECT_TRUE(r >= 25 && r <= 32) << s.id;
      }
      EXPECT_TRUE(x - r >= 0 && y - r >= 0 && x + r < w && y + r < h) << s.id;
      for (size_t j = 0; j < i; ++j) {
        const double d = std::hypot(x - objs[j]["x"].get<double>(), y - objs[j]["y"].get<double>());
        EXPECT_GE(d, r + objs[j]["radius"].get<int>() + 8 - 1e-9) << "objects touch in " << s.id;
      }
      const cv::Vec3b px = s.rgb.at<cv::Vec3b>(y, x);  // nothing else is drawn at the centre
      EXPECT_EQ(json({px[0], px[1], px[2]}), objs[i]["rgb"]) << s.id << " object " << i;
    }
    for (const json& t : scene["texts"]) {
      expect_text_within(t, objs, s.id, 2, 3, 8, 10);
      const int tx = t["x"], ty = t["y"], tw = t["w"], th = t["h"];
      EXPECT_TRUE(in_one_tile(tx, tx + tw - 1) && in_one_tile(ty, ty + th - 1))
          << s.id << " " << t["text"].get<std::string>();
    }
  }
}

// ---- Pixel measurements by differential rendering: the scene is rendered with and without some of its items
// from the same random stream (texts and objects are drawn last, over the same background), so the pixels
// that differ are exactly what those items drew. ----

// The scene rendered from a fixed stream, with only the items `keep_object` / `keep_texts` accept.
cv::Mat render_with(const Scene& scene, const std::function<bool(const SceneObject&)>& keep_object,
                    bool keep_texts) {
  Scene s = scene;
  s.objects.clear();
  for (const SceneObject& o : scene.objects)
    if (keep_object(o)) s.objects.push_back(o);
  if (!keep_texts) s.texts.clear();
  Rng rng(77);
  return render_scene(s, rng);
}

// LLaVA-NeXT's base view: the whole image resized to 336×336 (area averaging here; any smooth resize would
// do).
cv::Mat base_view(const cv::Mat& rgb) {
  cv::Mat out;
  cv::resize(rgb, out, cv::Size(kTile, kTile), 0, 0, cv::INTER_AREA);
  return out;
}

// Bounding box and count of the pixels inside `roi` where a and b differ by ≥ `threshold` on some channel.
struct Footprint {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1, n = 0;
  int w() const { return n ? x1 - x0 : 0; }
  int h() const { return n ? y1 - y0 : 0; }
};
Footprint footprint(const cv::Mat& a, const cv::Mat& b, cv::Rect roi, int threshold) {
  Footprint f;
  roi &= cv::Rect(0, 0, a.cols, a.rows);
  for (int y = roi.y; y < roi.y + roi.height; ++y)
    for (int x = roi.x; x < roi.x + roi.width; ++x) {
      const cv::Vec3b p = a.at<cv::Vec3b>(y, x), q = b.at<cv::Vec3b>(y, x);
      if (std::max({std::abs(p[0] - q[0]), std::abs(p[1] - q[1]), std::abs(p[2] - q[2])}) < threshold)
        continue;
      f.x0 = std::min(f.x0, x), f.y0 = std::min(f.y0, y), f.x1 = std::max(f.x1, x + 1),
      f.y1 = std::max(f.y1, y + 1);
      ++f.n;
    }
  return f;
}

// A window around (x, y) ± half pixels of the full image, mapped by (sx, sy).
cv::Rect window(double x, double y, double half, double sx, double sy) {
  const int x0 = int(std::floor((x - half) * sx)), y0 = int(std::floor((y - half) * sy));
  return cv::Rect(x0, y0, int(std::ceil((x + half) * sx)) - x0 + 1, int(std::ceil((y + half) * sy)) - y0 + 1);
}

constexpr size_t kNPixelSamples = 140;  // 20 per family
constexpr int kVisible = 24;            // grey levels: a change this large counts as drawn

TEST(SynthVqaHr, TextIsTileSizedAtFullResolutionAndBelowHalfAPatchInTheBaseView) {
  // The glyphs' own pixels: the string rendered in red ink and in blue ink (both have the same white outline,
  // and the layout does not depend on the ink) differs exactly where ink was drawn.
  int min_full_h = 1 << 30, max_full_h = 0;
  double max_small_side = 0, max_square_side = 0;
  size_t n_texts = 0;
  for (size_t i = 0; i < kNPixelSamples; ++i) {
    const SynthSample& s = samples()[i];
    for (size_t k = 0; k < s.scene.texts.size(); ++k) {
      Scene red = s.scene, blue = s.scene;
      red.texts[k].color = "red";
      blue.texts[k].color = "blue";
      const auto all = [](const SceneObject&) { return true; };
      const cv::Mat a = render_with(red, all, true), b = render_with(blue, all, true);
      const SceneText& t = s.scene.texts[k];
      const Footprint full = footprint(a, b, cv::Rect(t.x - 2, t.y - 2, t.w + 4, t.h + 4), kVisible);
      ASSERT_GT(full.n, 0) << s.id << " " << t.text;
      const double sx = double(kTile) / s.rgb.cols, sy = double(kTile) / s.rgb.rows;
      const Footprint base =
          footprint(base_view(a), base_view(b),
                    window(t.x + t.w / 2.0, t.y + t.h / 2.0, std::max(t.w, t.h) / 2.0 + 2, sx, sy), kVisible);
      ASSERT_GT(base.n, 0) << s.id << " " << t.text;
      // A 336-px tile shows the glyphs 7–12 px tall (cap height 8–10 px, ±1 of anti-aliasing) and ≥ 5 px
      // wide; SynthVQA's own text, which the bundled model reads, is 12–20 px tall at 336.
      const double full_glyph_w = double(full.w()) / double(t.text.size());
      EXPECT_GE(full.h(), 7) << s.id << " " << t.text;
      EXPECT_LE(full.h(), 12) << s.id << " " << t.text;
      EXPECT_GE(full_glyph_w, 5.0) << s.id << " " << t.text;
      min_full_h = std::min(min_full_h, full.h()), max_full_h = std::max(max_full_h, full.h());
      // The base view, measured in its own pixels: at least one side of a glyph is ≤ 7 px (half a 14-px ViT
      // patch: 12 px halved, plus a pixel where a stroke straddles two base pixels); on the square canvas
      // (both axes halved) both sides are.
      const double base_glyph_w = double(base.w()) / double(t.text.size());
      const double small_side = std::min<double>(base.h(), base_glyph_w);
      EXPECT_LE(small_side, 7.0) << s.id << " " << t.text << " on " << s.rgb.cols << "x" << s.rgb.rows;
      max_small_side = std::max(max_small_side, small_side);
      if (s.rgb.cols == s.rgb.rows) {
        const double large_side = std::max<double>(base.h(), base_glyph_w);
        EXPECT_LE(large_side, 7.0) << s.id << " " << t.text;
        max_square_side = std::max(max_square_side, large_side);
      }
      ++n_texts;
    }
  }
  std::printf(
      "%zu strings: glyphs %d–%d px tall at full resolution; base view: smaller glyph side ≤ %.2f px, "
      "on 672x672 larger side ≤ %.2f px\n",
      n_texts, min_full_h, max_full_h, max_small_side, max_square_side);
}

TEST(SynthVqaHr, TinyObjectsAreUnderAPatchAtFullResolutionAndAFewPixelsInTheBaseView) {
  // Per canvas: the largest base-view extent of a tiny object along a downscaled axis, and area on 672x672.
  int tiny_full_min = 1 << 30, tiny_full_max = 0, large_base_min = 1 << 30;
  int tiny_base_halved_max = 0, tiny_base_third_max = 0;  // extent along a halved / third-scaled axis
  int tiny_base_area_square_max = 0;
  for (size_t i = 0; i < kNPixelSamples; ++i) {
    const SynthSample& s = samples()[i];
    const auto is_tiny = [](const SceneObject& o) { return o.size == SizeClass::kTiny; };
    const cv::Mat with = render_with(
        s.scene, [](const SceneObject&) { return true; }, false);
    const cv::Mat no_tiny = render_with(
        s.scene, [&](const SceneObject& o) { return !is_tiny(o); }, false);
    const cv::Mat no_large = render_with(s.scene, is_tiny, false);
    const cv::Mat base_with = base_view(with), base_no_tiny = base_view(no_tiny),
                  base_no_large = base_view(no_large);
    const double sx = double(kTile) / s.rgb.cols, sy = double(kTile) / s.rgb.rows;
    for (const SceneObject& o : s.scene.objects) {
      const double half = o.radius + 4;  // objects are ≥ 8 px apart: the window holds this object only
      if (is_tiny(o)) {
        const Footprint full = footprint(with, no_tiny, window(o.x, o.y, half, 1, 1), kVisible);
        const Footprint base = footprint(base_with, base_no_tiny, window(o.x, o.y, half, sx, sy), kVisible);
        // Full resolution: 9–20 px along its longer side (a radius-6 square, 8.4 px a side, to a radius-8
        // circle, 17 px, each with its outline and anti-aliasing): about one 14-px patch.
        EXPECT_GE(std::max(full.w(), full.h()), 9) << s.id << " tiny " << info(o.shape).name;
        EXPECT_LE(std::max(full.w(), full.h()), 20) << s.id << " tiny " << info(o.shape).name;
        tiny_full_min = std::min(tiny_full_min, std::max(full.w(), full.h()));
        tiny_full_max = std::max(tiny_full_max, std::max(full.w(), full.h()));
        // Base view: ≤ 11 px along a halved axis, ≤ 8 px along a third-scaled one (20 px scaled, plus a pixel
        // of resampling blur on each side); on 672x672 at most half a patch of pixels changed at all.
        if (sx < 1) EXPECT_LE(base.w(), sx < 0.4 ? 8 : 11) << s.id << " tiny " << info(o.shape).name;
        if (sy < 1) EXPECT_LE(base.h(), sy < 0.4 ? 8 : 11) << s.id << " tiny " << info(o.shape).name;
        for (const auto& [scale, extent] : {std::pair(sx, base.w()), std::pair(sy, base.h())}) {
          int& worst = scale < 0.4 ? tiny_base_third_max : tiny_base_halved_max;
          if (scale < 1) worst = std::max(worst, extent);
        }
        if (s.rgb.cols == s.rgb.rows) {
          EXPECT_LE(base.n, 98) << s.id << " tiny " << info(o.shape).name;
          tiny_base_area_square_max = std::max(tiny_base_area_square_max, base.n);
        }
      } else {
        const Footprint base = footprint(base_with, base_no_large, window(o.x, o.y, half, sx, sy), kVisible);
        // Large objects stay ≥ 16 px along their longer side in the base view (more than a patch: a radius-25
        // square is 35 px a side, 17.5 px halved).
        EXPECT_GE(std::max(base.w(), base.h()), 16) << s.id << " large " << info(o.shape).name;
        large_base_min = std::min(large_base_min, std::max(base.w(), base.h()));
      }
    }
  }
  std::printf(
      "tiny objects: %d–%d px at full resolution; base view: ≤ %d px along a halved axis, ≤ %d px along "
      "a third-scaled one, ≤ %d px changed on 672x672; large objects ≥ %d px in the base view\n",
      tiny_full_min, tiny_full_max, tiny_base_halved_max, tiny_base_third_max, tiny_base_area_square_max,
      large_base_min);
}

TEST(SynthVqaHr, FamiliesAnswersAndCanvasesAreBalanced) {
  std::map<std::string, std::map<std::string, size_t>> answers;  // family → answer → count
  std::map<std::pair<int, int>, size_t> canvases;
  std::map<std::string, std::set<size_t>> tiny_totals;  // tiny_count answer → tiny totals seen
  for (const SynthSample& s : samples()) {
    ++answers[s.family][s.answer];
    ++canvases[{s.scene.width, s.scene.height}];
    if (s.family == "tiny_count") {
      size_t n = 0;
      for (const SceneObject& o : s.scene.objects) n += o.size == SizeClass::kTiny;
      tiny_totals[s.answer].insert(n);
    }
  }
  const std::map<std::string, size_t> n_answers{{"large_color", 8}, {"large_shape", 6}, {"large_count", 4},
                                                {"tiny_color", 8},  {"tiny_shape", 6},  {"tiny_count", 4}};
  ASSERT_EQ(answers.size(), 7u);
  for (const auto& [family, counts] : answers) {
    size_t total = 0, lo = kN, hi = 0;
    for (const auto& [a, n] : counts) total += n, lo = std::min(lo, n), hi = std::max(hi, n);
    EXPECT_EQ(total, kN / 7) << family;
    if (family == "text") {
      for (const auto& [a, n] : counts) EXPECT_TRUE(a.size() == 2 || a.size() == 3) << a;
      continue;
    }
    EXPECT_EQ(counts.size(), n_answers.at(family)) << family;
    EXPECT_LE(hi - lo, 1u) << family;
  }
  // 672x672 half the time, each other canvas an eighth: binomial bounds at ±4.5 σ over 280 samples.
  for (const auto& [wh, n] : canvases) {
    const double p = wh.first == wh.second ? 0.5 : 0.125, sd = std::sqrt(p * (1 - p) * kN);
    EXPECT_NEAR(double(n), p * kN, 4.5 * sd) << wh.first << "x" << wh.second;
  }
  EXPECT_EQ(canvases.size(), 5u);
  // The number of tiny objects says nothing about the tiny count: every answer meets the whole range 5–8.
  for (const auto& [k, totals] : tiny_totals) EXPECT_GE(totals.size(), 3u) << "answer " << k;
}

TEST(SynthVqaHr, SameSeedGivesIdenticalBytesAndIsIndependentOfSynthVqa) {
  const SynthSample a = make_hr_sample(kSeed, 5), b = make_hr_sample(kSeed, 5),
                    c = make_hr_sample(kSeed + 1, 5);
  EXPECT_EQ(a.record(), b.record());
  EXPECT_EQ(cv::norm(a.rgb, b.rgb, cv::NORM_INF), 0.0);
  EXPECT_NE(a.record()["scene"], c.record()["scene"]);
  // The HR stream of (seed, index) is not SynthVQA's: different draws, not just a different renderer.
  EXPECT_NE(hr_sample_seed(kSeed, 5), sample_seed(kSeed, 5));
  const std::string h1 = synthvqa_content_hash(7, 14, 1, SynthKind::kHr);
  EXPECT_EQ(h1, synthvqa_content_hash(7, 14, 2, SynthKind::kHr));
  EXPECT_NE(h1, synthvqa_content_hash(7, 14, 2, SynthKind::kSynthVqa));
  EXPECT_NE(h1, synthvqa_content_hash(8, 14, 2, SynthKind::kHr));
}

TEST(SynthVqaHr, GeneratedFoldersArePrefixStableAndRecordTheirCanvases) {
  test::TempDir tmp;
  SynthOptions opts;
  opts.kind = SynthKind::kHr;
  opts.seed = 99;
  opts.count = 4;
  const SynthResult r1 = generate_synthvqa(opts, tmp / "a");
  opts.count = 6;
  opts.n_threads = 1;
  generate_synthvqa(opts, tmp / "c");
  EXPECT_EQ(r1.content_hash, synthvqa_content_hash(99, 4, 0, SynthKind::kHr));
  const std::string jsonl4 = read_file(tmp / "a/data.jsonl"), jsonl6 = read_file(tmp / "c/data.jsonl");
  EXPECT_EQ(jsonl6.substr(0, jsonl4.size()), jsonl4) << "the first samples must not depend on the count";
  const json manifest = json::parse(read_file(tmp / "a/manifest.json"));
  EXPECT_EQ(manifest["name"], "synthvqa-hr");
  EXPECT_EQ(manifest["generator_version"], kHrGeneratorVersion);
  EXPECT_EQ(manifest["content_hash"], r1.content_hash);
  size_t n = 0;
  for (const auto& [canvas, k] : manifest["image_sizes"].items()) n += k.get<size_t>();
  EXPECT_EQ(n, 4u);
  // The PNG decodes to the recorded size and the generated pixels.
  std::istringstream lines(jsonl4);
  std::string line;
  while (std::getline(lines, line)) {
    const json rec = json::parse(line);
    cv::Mat bgr = cv::imread(tmp / ("a/" + rec["image"].get<std::string>()), cv::IMREAD_COLOR), rgb;
    ASSERT_FALSE(bgr.empty());
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    EXPECT_EQ(rgb.cols, rec["scene"]["width"].get<int>());
    EXPECT_EQ(rgb.rows, rec["scene"]["height"].get<int>());
    EXPECT_EQ(cv::norm(rgb, make_hr_sample(99, std::stoull(rec["id"].get<std::string>())).rgb, cv::NORM_INF),
              0.0);
  }
}

TEST(SynthVqaHr, SceneJsonRoundTripsWithSizeAndTinyObjects) {
  for (uint64_t i = 0; i < 14; ++i) {
    const Scene s = make_hr_sample(kSeed, i).scene;
    const Scene back = scene_from_json(scene_to_json(s));
    EXPECT_EQ(back.width, s.width);
    EXPECT_EQ(back.height, s.height);
    EXPECT_EQ(scene_to_json(back), scene_to_json(s));
  }
}

TEST(SynthVqaHr, HrCalibSplitReproducesItsRecordedHash) {
  const SplitInfo& calib = find_split("hr-calib");
  EXPECT_EQ(calib.count, 500u);
  EXPECT_EQ(calib.kind, SynthKind::kHr);
  EXPECT_EQ(find_split("hr-test").count, 2000u);
  EXPECT_EQ(find_split("hr-test").kind, SynthKind::kHr);
  std::set<uint64_t> seeds;
  for (const SplitInfo& s : split_table()) seeds.insert(s.seed);
  EXPECT_EQ(seeds.size(), split_table().size()) << "every split has its own seed";
  EXPECT_EQ(synthvqa_content_hash(calib.seed, calib.count, 0, SynthKind::kHr), calib.content_hash);
  try {
    check_split_hash(calib, "sha256:0000", "/some/dir");
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("synthvqa-hr generator version"), std::string::npos) << e.what();
  }
}

TEST(SynthVqaHr, CliSynthHrWritesDatasetAndRejectsAMismatchedSplit) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(run_cli("data synth --hr --seed 4 --count 3 --out " + (tmp / "d"), &out, tmp), 0) << out;
  EXPECT_NE(out.find(synthvqa_content_hash(4, 3, 0, SynthKind::kHr)), std::string::npos) << out;
  EXPECT_EQ(json::parse(read_file(tmp / "d/manifest.json"))["name"], "synthvqa-hr");
  EXPECT_EQ(run_cli("data synth --hr --split calib --out " + (tmp / "e"), &out, tmp), 2) << out;
  EXPECT_NE(out.find("hr-calib"), std::string::npos) << out;
  ASSERT_EQ(run_cli("data check --data " + (tmp / "d") + " --decode", &out, tmp), 0) << out;
  EXPECT_NE(out.find("3 samples"), std::string::npos) << out;
}

}  // namespace
}  // namespace vispco::eval::synthvqa
