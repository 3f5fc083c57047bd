// Image decoding (OpenCV: JPEG, PNG, WebP, BMP) and LLaVA-1.5 preprocessing: pad to square with the mean
// colour (LLaVA's expand2square), bicubic resize to the tower's input size, rescale 1/255, CLIP mean/std.
// Reference: LLaVA `llava/mm_utils.py` expand2square + HF CLIPImageProcessor.
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <opencv2/core.hpp>
#include <string>

namespace vispco::io {

/// Decodes an image file to 8-bit RGB, shape (H, W) CV_8UC3. Grey and RGBA inputs are converted.
/// @throws IoError when the file is missing/unreadable, FormatError when the bytes are not an image.
cv::Mat load_image_rgb(const std::string& path);
/// Decodes encoded image bytes (PNG/JPEG/WebP/BMP) to 8-bit RGB. @throws FormatError.
cv::Mat decode_image_rgb(const std::string& bytes);

/// Preprocessing settings of a CLIP image processor (preprocessor_config.json fields).
struct ImagePreprocessConfig {
  /// Square side of the tower's input, pixels (crop_size / vision_config.image_size). Valid: ≥ 1.
  int image_size = 336;
  /// Per-channel RGB mean in [0, 1] (image_mean); also the padding colour, as int(mean·255).
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  /// Per-channel RGB std (image_std). Valid: > 0.
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  /// LLaVA-1.5 "pad" aspect mode: pad to a centred square with the mean colour before resizing.
  bool pad_to_square = true;
};

/// LLaVA-1.5 preprocessing of an RGB image: optional expand2square with colour int(mean·255) (image centred,
/// odd remainder on the right/bottom as in LLaVA), resize to image_size × image_size with Pillow's bicubic
/// (io/pil_resize.h, bit for bit what transformers' CLIPImageProcessor gets from PIL), then (x/255 −
/// mean)/std.
/// @return float32 tensor [3, S, S], CPU, channel order RGB.
/// @throws InvalidArgument for an empty or non-CV_8UC3 image, or a config with image_size < 1 or std ≤ 0.
at::Tensor preprocess_llava(const cv::Mat& rgb, const ImagePreprocessConfig& cfg);

}  // namespace vispco::io
