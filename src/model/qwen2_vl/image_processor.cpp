// Qwen2-VL's image processor; see image_processor.h.
#include "model/qwen2_vl/image_processor.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/errors.h"
#include "core/json_file.h"
#include "io/pil_resize.h"
#include "model/qwen2_vl/read_field.h"
#include "model/text_config.h"

namespace vispco {

namespace {

using nlohmann::json;

// Python's round() of a double: to the nearest integer, ties to even.
double round_half_even(double x) {
  const double lo = std::floor(x);
  const double frac = x - lo;  // exact for the magnitudes of image sides
  if (frac > 0.5) return lo + 1;
  if (frac < 0.5) return lo;
  return std::fmod(lo, 2.0) == 0.0 ? lo : lo + 1;
}

using qwen2_vl_detail::read_field;

}  // namespace

void QwenImageProcessorConfig::validate() const {
  const std::string w = "preprocessor_config";
  require_positive(w, {{"min_pixels", min_pixels},
                       {"max_pixels", max_pixels},
                       {"patch_size", patch_size},
                       {"merge_size", merge_size},
                       {"temporal_patch_size", temporal_patch_size}});
  require_config(min_pixels <= max_pixels, w + ".min_pixels " + std::to_string(min_pixels) +
                                               " exceeds max_pixels " + std::to_string(max_pixels));
  require_config(rescale_factor > 0,
                 w + ".rescale_factor must be > 0 (got " + std::to_string(rescale_factor) + ")");
  for (int c = 0; c < 3; ++c)
    require_config(image_std[c] > 0, w + ".image_std[" + std::to_string(c) + "] must be > 0 (got " +
                                         std::to_string(image_std[c]) + ")");
}

void QwenImageProcessorConfig::validate_against(const Qwen2VisionConfig& v) const {
  validate();
  auto same = [](const char* ours, int64_t a, const char* theirs, int64_t b) {
    require_config(a == b, std::string("preprocessor_config.") + ours + " " + std::to_string(a) +
                               " differs from vision_config." + theirs + " " + std::to_string(b));
  };
  same("patch_size", patch_size, "patch_size", v.patch_size);
  same("merge_size", merge_size, "spatial_merge_size", v.spatial_merge_size);
  same("temporal_patch_size", temporal_patch_size, "temporal_patch_size", v.temporal_patch_size);
  require_config(v.in_channels == 3, "vision_config.in_channels " + std::to_string(v.in_channels) +
                                         ": the image processor makes RGB (3-channel) patches");
}

QwenImageProcessorConfig qwen_image_processor_config_from_json(const json& j, const Qwen2VisionConfig& vision,
                                                               const std::string& w) {
  if (!j.is_object()) throw ConfigError(w + " is not a JSON object");
  QwenImageProcessorConfig c;
  c.patch_size = vision.patch_size;
  c.merge_size = vision.spatial_merge_size;
  c.temporal_patch_size = vision.temporal_patch_size;
  const json size = j.contains("size") && j["size"].is_object() ? j["size"] : json::object();
  if (!read_field(j, "min_pixels", w, c.min_pixels))
    read_field(size, "shortest_edge", w + " size", c.min_pixels);
  if (!read_field(j, "max_pixels", w, c.max_pixels))
    read_field(size, "longest_edge", w + " size", c.max_pixels);
  read_field(j, "patch_size", w, c.patch_size);
  read_field(j, "merge_size", w, c.merge_size);
  read_field(j, "temporal_patch_size", w, c.temporal_patch_size);
  read_field(j, "do_resize", w, c.do_resize);
  read_field(j, "do_rescale", w, c.do_rescale);
  read_field(j, "rescale_factor", w, c.rescale_factor);
  read_field(j, "do_normalize", w, c.do_normalize);
  read_field(j, "image_mean", w, c.image_mean);
  read_field(j, "image_std", w, c.image_std);
  c.validate_against(vision);
  return c;
}

json to_json(const QwenImageProcessorConfig& c) {
  return {{"min_pixels", c.min_pixels},
          {"max_pixels", c.max_pixels},
          {"size", {{"shortest_edge", c.min_pixels}, {"longest_edge", c.max_pixels}}},
          {"patch_size", c.patch_size},
          {"merge_size", c.merge_size},
          {"temporal_patch_size", c.temporal_patch_size},
          {"do_resize", c.do_resize},
          {"do_rescale", c.do_rescale},
          {"rescale_factor", c.rescale_factor},
          {"do_normalize", c.do_normalize},
          {"image_mean", c.image_mean},
          {"image_std", c.image_std},
          {"do_convert_rgb", true},
          {"image_processor_type", "Qwen2VLImageProcessor"}};
}

QwenImageProcessorConfig load_qwen_image_processor_config(const std::string& dir,
                                                          const Qwen2VisionConfig& vision) {
  const auto path = std::filesystem::path(dir) / "preprocessor_config.json";
  if (!std::filesystem::exists(path))
    return qwen_image_processor_config_from_json(json::object(), vision, path.string());
  return qwen_image_processor_config_from_json(read_json_file(path.string(), "image preprocessing config"),
                                               vision, path.string());
}

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels) {
  if (height < 1 || width < 1 || factor < 1)
    throw InvalidArgument("smart_resize: image " + std::to_string(width) + "×" + std::to_string(height) +
                          " px with factor " + std::to_string(factor) + " (need sides ≥ 1 and factor ≥ 1)");
  const double h = double(height), w = double(width), f = double(factor);
  if (std::max(h, w) / std::min(h, w) > 200)
    throw InvalidArgument(
        "image " + std::to_string(width) + "×" + std::to_string(height) +
        " px: absolute aspect ratio must be at most 200 (Qwen2-VL's image processor refuses "
        "more); crop or pad it");
  int64_t h_bar = int64_t(round_half_even(h / f)) * factor;
  int64_t w_bar = int64_t(round_half_even(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt((h * w) / double(max_pixels));
    h_bar = std::max(factor, int64_t(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, int64_t(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / (h * w));
    h_bar = int64_t(std::ceil(h * beta / f)) * factor;
    w_bar = int64_t(std::ceil(w * beta / f)) * factor;
  }
  if (h_bar < 1 || w_bar < 1)
    throw InvalidArgument("smart_resize: image " + std::to_string(width) + "×" + std::to_string(height) +
                          " px resizes to an empty side (min_pixels " + std::to_string(min_pixels) + ")");
  return {h_bar, w_bar};
}

QwenPixels qwen_preprocess(const cv::Mat& rgb, const QwenImageProcessorConfig& cfg) {
  if (rgb.empty() || rgb.type() != CV_8UC3)
    throw InvalidArgument("Qwen2-VL preprocessing: expected a non-empty 8-bit RGB image (CV_8UC3)");
  const int64_t p = cfg.patch_size, m = cfg.merge_size, tp = cfg.temporal_patch_size;
  int64_t rh = rgb.rows, rw = rgb.cols;
  cv::Mat image = rgb;
  if (cfg.do_resize) {
    std::tie(rh, rw) = smart_resize(rh, rw, cfg.factor(), cfg.min_pixels, cfg.max_pixels);
    if (rh != rgb.rows || rw != rgb.cols) image = io::resize_bicubic_pil(rgb, int(rw), int(rh));
  } else if (rh % cfg.factor() != 0 || rw % cfg.factor() != 0) {
    throw InvalidArgument("Qwen2-VL preprocessing: do_resize is false but the image is " +
                          std::to_string(rw) + "×" + std::to_string(rh) +
                          " px, not a multiple of patch_size · merge_size = " + std::to_string(cfg.factor()) +
                          " on both sides");
  }
  if (!image.isContinuous()) image = image.clone();
  // [H, W, 3] uint8 → [3, H, W] float64: rescale and normalise in double (transformers: float32), then fp32.
  auto x = at::from_blob(image.data, {rh, rw, 3}, at::kByte).to(at::kDouble).permute({2, 0, 1});
  if (cfg.do_rescale) x = x * cfg.rescale_factor;
  if (cfg.do_normalize) {
    auto opts = at::TensorOptions().dtype(at::kDouble);
    auto mean =
        at::tensor(std::vector<double>(cfg.image_mean.begin(), cfg.image_mean.end()), opts).view({3, 1, 1});
    auto std =
        at::tensor(std::vector<double>(cfg.image_std.begin(), cfg.image_std.end()), opts).view({3, 1, 1});
    x = (x - mean) / std;
  }
  const int64_t gh = rh / p, gw = rw / p;
  // The frame repeated in time, then [t, T, C, h/m, m, P, w/m, m, P] → (t, h/m, w/m, m, m, C, T, P, P).
  auto frames = x.to(at::kFloat).unsqueeze(0).expand({tp, 3, rh, rw});
  auto patches = frames.reshape({1, tp, 3, gh / m, m, p, gw / m, m, p}).permute({0, 3, 6, 4, 7, 2, 1, 5, 8});
  QwenPixels out;
  out.pixel_values = patches.reshape({gh * gw, 3 * tp * p * p}).contiguous();
  out.grid_t = 1;
  out.grid_h = gh;
  out.grid_w = gw;
  return out;
}

}  // namespace vispco
