// Token heat-maps: each view of the image as the model's encoder saw it (model/token_panels.h: LLaVA-1.5's
// padded square; LLaVA-NeXT's base view and its tiles with the tile lines), each cell tinted by its visual
// token's score, and the tokens kept by the plan outlined.
#pragma once
#include <ATen/core/Tensor.h>

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "model/token_panels.h"

namespace vispco {

/// Renders a heat-map, the panels side by side (a gap of 8 px between them), each `side` pixels tall.
/// @param rgb the original image (8-bit RGB) @param panels where the tokens lie (VisionLanguageModel::
/// token_panels) @param scores [N_v] fp32 per-token score (NaN = not scored: left untinted); ranks over all
/// scored tokens, not raw values, set the colour (attention is heavy-tailed) @param kept [N_v] bool tokens
/// outlined in white. Tile lines are drawn in yellow. Tokens in no panel's cells (LLaVA-NeXT's newlines) are
/// ranked but not drawn. @return 8-bit BGR image (OpenCV order, ready for imwrite).
/// @throws InvalidArgument when a panel's cells reach past N_v or scores and kept differ in length.
cv::Mat render_token_heatmap(const cv::Mat& rgb, const std::vector<TokenPanel>& panels,
                             const at::Tensor& scores, const at::Tensor& kept, int side = 672);

/// One square panel of grid × grid patches over the image padded to a square (LLaVA-1.5's view), side × side.
cv::Mat render_token_heatmap(const cv::Mat& rgb, int64_t grid, const at::Tensor& scores,
                             const at::Tensor& kept, int side = 672);

/// Writes render_token_heatmap(rgb, panels, …) to `path` (PNG/JPEG by extension). @throws IoError.
void write_token_heatmap(const std::string& path, const cv::Mat& rgb, const std::vector<TokenPanel>& panels,
                         const at::Tensor& scores, const at::Tensor& kept, int side = 672);

}  // namespace vispco
