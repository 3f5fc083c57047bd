// Qwen2-VL / Qwen2.5-VL image processor (transformers v4.55 Qwen2VLImageProcessor, the slow PIL path,
// models/qwen2_vl/image_processing_qwen2_vl.py): smart_resize to multiples of patch · merge within
// [min_pixels, max_pixels] keeping the aspect ratio, Pillow bicubic (io/pil_resize.h), rescale 1/255,
// mean/std, the image repeated to temporal_patch_size frames, and patches flattened in merge-blocked order.
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <opencv2/core.hpp>
#include <string>
#include <utility>

#include "model/qwen2_vl/vision_config.h"

namespace vispco {

/// preprocessor_config.json of a Qwen2-VL / Qwen2.5-VL folder. Defaults are Qwen2VLImageProcessor's.
struct QwenImageProcessorConfig {
  /// Smallest resized area, pixels ("min_pixels", else "size.shortest_edge"); > 0, ≤ max_pixels.
  int64_t min_pixels = 56 * 56;
  /// Largest resized area, pixels ("max_pixels", else "size.longest_edge"); > 0.
  int64_t max_pixels = 28 * 28 * 1280;
  int64_t patch_size = 14;            ///< P, pixels; must equal vision_config.patch_size
  int64_t merge_size = 2;             ///< m; must equal vision_config.spatial_merge_size
  int64_t temporal_patch_size = 2;    ///< frames per patch; must equal vision_config.temporal_patch_size
  bool do_resize = true;              ///< smart_resize; false needs sides already multiples of P · m
  bool do_rescale = true;             ///< multiply by rescale_factor
  double rescale_factor = 1.0 / 255;  ///< > 0
  bool do_normalize = true;           ///< (x − image_mean) / image_std per channel
  std::array<double, 3> image_mean = {0.48145466, 0.4578275, 0.40821073};  ///< OpenAI CLIP's, RGB
  std::array<double, 3> image_std = {0.26862954, 0.26130258, 0.27577711};  ///< OpenAI CLIP's, RGB; > 0

  /// P · m: both resized sides are multiples of it.
  int64_t factor() const { return patch_size * merge_size; }
  /// Checks every field. @throws ConfigError naming the field, its value and the valid range.
  void validate() const;
  /// validate(), and patch_size / merge_size / temporal_patch_size equal to the tower's.
  /// @throws ConfigError naming both values.
  void validate_against(const Qwen2VisionConfig& vision) const;
  bool operator==(const QwenImageProcessorConfig&) const = default;
};

/// Parses preprocessor_config.json's object with the fallbacks of transformers (and of the reference):
/// min_pixels / max_pixels, else size.shortest_edge / size.longest_edge, else the defaults; patch_size,
/// merge_size and temporal_patch_size, else the tower's patch_size, spatial_merge_size and
/// temporal_patch_size. Other keys are ignored. The result is validated against `vision`.
/// @param where the file's name in messages. @throws ConfigError for a field of the wrong type (named) or a
/// failed validate_against().
QwenImageProcessorConfig qwen_image_processor_config_from_json(const nlohmann::json& j,
                                                               const Qwen2VisionConfig& vision,
                                                               const std::string& where);
/// The preprocessor_config.json object (also "size" {shortest_edge, longest_edge},
/// "image_processor_type" Qwen2VLImageProcessor); reads back to an equal config.
nlohmann::json to_json(const QwenImageProcessorConfig& cfg);
/// qwen_image_processor_config_from_json of `<dir>/preprocessor_config.json`, or the defaults (with the
/// tower's patch, merge and temporal sizes) when the folder has none.
/// @throws IoError, FormatError (the file), ConfigError.
QwenImageProcessorConfig load_qwen_image_processor_config(const std::string& dir,
                                                          const Qwen2VisionConfig& vision);

/// transformers' smart_resize: each side rounded to the nearest multiple of `factor` with Python's round()
/// (half to even: 42 → 56, 70 → 56, 98 → 112 at factor 28); when that area exceeds max_pixels, both sides
/// scaled by 1/β, β = √(h·w / max_pixels), and floored to multiples (never below factor); when it is under
/// min_pixels, scaled by β = √(min_pixels / (h·w)) and ceiled. Same double arithmetic as the Python.
/// @return {height, width} resized, pixels. @throws InvalidArgument for a side < 1, factor < 1, or an aspect
/// ratio max/min above 200 (transformers raises ValueError).
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels);

/// One image's processor output.
struct QwenPixels {
  /// [N_p, C·T·P·P] fp32, N_p = grid_t·grid_h·grid_w: patches in merge-blocked order (each m × m block of
  /// the patch grid consecutive, blocks row-major, the patches of a block row-major), each row channel,
  /// then frame (the image repeated temporal_patch_size times), then the P × P pixels row-major.
  at::Tensor pixel_values;
  int64_t grid_t = 1;  ///< temporal patches: 1 for an image
  int64_t grid_h = 0;  ///< patch rows (resized height / P), a multiple of m
  int64_t grid_w = 0;  ///< patch columns (resized width / P), a multiple of m
  /// Visual tokens the merger makes: N_p / m².
  int64_t n_visual_tokens(int64_t merge_size) const {
    return grid_t * grid_h * grid_w / (merge_size * merge_size);
  }
};

/// Preprocesses one 8-bit RGB image (CV_8UC3, any size): smart_resize with Pillow's bicubic (none when the
/// size already matches), rescale, normalise (in double, then fp32), repeat in time, merge-blocked rows.
/// @throws InvalidArgument for an empty or non-CV_8UC3 image, an aspect ratio above 200, or (do_resize
/// false) sides that are not multiples of P · m.
QwenPixels qwen_preprocess(const cv::Mat& rgb, const QwenImageProcessorConfig& cfg);

}  // namespace vispco
