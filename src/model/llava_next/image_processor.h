// LLaVA-NeXT's image processor (transformers v4.52 LlavaNextImageProcessor, the slow one, per image): choose
// the best pinpoint (model/llava_next/anyres.h), resize keeping the aspect ratio, pad to the pinpoint with
// black (0 before normalisation), cut into image_size tiles row-major, put the whole image resized to
// image_size × image_size (aspect not kept) first, then rescale 1/255 and CLIP mean/std. The original size
// travels with the pixels in one extra slice (image_size_slice), because the model needs it to choose the
// grid and to unpad, and VisionLanguageModel hands the family pixels in the compute dtype. Both resizes are
// Pillow's bicubic (io/pil_resize.h), as transformers' resize() does them.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <opencv2/core.hpp>
#include <utility>

#include "io/image.h"
#include "model/llava_next/anyres.h"
#include "model/llava_next/config.h"

namespace vispco {

/// One image's AnyRes pictures before normalisation (8-bit RGB).
struct AnyresImages {
  AnyresGeometry geometry;  ///< anyres_geometry of the image
  cv::Mat base;             ///< the whole image resized to image_size × image_size
  cv::Mat resized;          ///< the image resized to geometry.canvas.resized (before padding)
  cv::Mat canvas;           ///< `resized` on the black canvas of the best resolution
};

/// The resizes and the padding of one RGB image (CV_8UC3). @throws InvalidArgument for another image type or
/// a size anyres_geometry refuses.
AnyresImages anyres_images(const cv::Mat& rgb, const LlavaNextConfig& cfg);

/// The pixel values of one RGB image: [1 + T + 1, 3, S, S] fp32 — the base image, the T tiles row-major
/// (T = geometry.n_tiles()), then image_size_slice(height, width). @throws as anyres_images.
at::Tensor anyres_preprocess(const cv::Mat& rgb, const LlavaNextConfig& cfg,
                             const io::ImagePreprocessConfig& pre);

/// Largest image side the size slice carries, pixels (4 hexadecimal digits).
inline constexpr int64_t kMaxAnyresImageSide = 65535;

/// [3, S, S] fp32 zeros holding an image's height and width as 4 hexadecimal digits each (values 0–15,
/// exact in bf16, fp16 and fp32, so they survive the compute-dtype conversion), after a marker value, at
/// [0][0][0..8]. @throws InvalidArgument for a side outside [1, kMaxAnyresImageSide] or S < 9.
at::Tensor image_size_slice(int64_t height, int64_t width, int64_t image_size);
/// The (height, width) of an image_size_slice in any floating dtype, on any device.
/// @throws InvalidArgument when `slice` is not one (wrong marker or digits: not LLaVA-NeXT pixels).
std::pair<int64_t, int64_t> decode_image_size_slice(const at::Tensor& slice);

}  // namespace vispco
