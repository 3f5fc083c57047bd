// Pillow's bicubic resize (Image.resize(size, Image.BICUBIC), libImaging/Resample.c: a = −0.5, the kernel
// stretched by the scale when downscaling (antialiasing), coefficients normalised then rounded to 22-bit
// fixed point, a horizontal pass into 8-bit rows, then a vertical pass), which Hugging Face's image
// processors call. OpenCV's INTER_CUBIC (a = −0.75, no antialiasing) differs by about a grey level on
// ordinary images and far more when shrinking by 2× or more.
#pragma once
#include <opencv2/core.hpp>

namespace vispco::io {

/// Resizes an 8-bit RGB image (CV_8UC3) to width × height as Pillow's bicubic resize does, bit for bit;
/// a copy when the size is already that (Pillow returns a copy too).
/// @throws InvalidArgument for an empty or non-CV_8UC3 image or a size < 1.
cv::Mat resize_bicubic_pil(const cv::Mat& rgb, int width, int height);

}  // namespace vispco::io
