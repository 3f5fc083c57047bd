// Token heat-maps: the image as the model sees it (padded to square), each patch tinted by its visual
// token's score, and the patches kept by the plan outlined.
#pragma once
#include <ATen/core/Tensor.h>

#include <opencv2/core.hpp>
#include <string>

namespace vispco {

/// Renders a heat-map. @param rgb the original image (8-bit RGB) @param grid patches per side
/// @param scores [N_v] fp32 per-patch score (NaN = not scored: left untinted); ranks, not raw values, set the
/// colour (attention is heavy-tailed) @param kept [N_v] bool patches outlined @param side output size,
/// pixels.
/// @return 8-bit BGR image side × side (OpenCV order, ready for imwrite).
cv::Mat render_token_heatmap(const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                             const at::Tensor& kept, int side = 672);

/// Writes render_token_heatmap(...) to `path` (PNG/JPEG by extension). @throws IoError.
void write_token_heatmap(const std::string& path, const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                         const at::Tensor& kept, int side = 672);

}  // namespace vispco
