// SynthVQA rendering with OpenCV: a cluttered background (texture from a registry + lighting + distractor
// strokes + grain), then the scene's objects (filled, a dark outline of 2 px, 1 px for tiny ones) and text
// strings (outlined Hershey font).
// Deterministic: integer and IEEE-exact arithmetic only (no sin/exp), fixed vertex tables, OpenCV drawing.
// Any image size (Scene::width × height): texture scales are in pixels, the same for SynthVQA and -HR.
#pragma once
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "eval/synthvqa/rng.h"
#include "eval/synthvqa/scene.h"

namespace vispco::eval::synthvqa {

/// Paints a full background texture into an RGB image (CV_8UC3, any size), drawing from rng.
using BackgroundPainter = void (*)(cv::Mat& rgb, Rng& rng);

/// One background kind: its name (stored in Scene::background) and painter.
struct BackgroundInfo {
  const char* name;
  BackgroundPainter paint;
};

/// The background registry: gradient, stripes, checker, blotches, rings, dots. Never flat: every kind
/// varies at several scales, and render_scene adds lighting, strokes and grain on top.
const std::vector<BackgroundInfo>& background_table();
/// @throws InvalidArgument naming the valid kinds.
const BackgroundInfo& find_background(const std::string& name);

/// How a string of a given nominal cap height is drawn (FONT_HERSHEY_SIMPLEX with an outline).
struct TextMetrics {
  double scale = 1.0;  ///< OpenCV font scale
  int thickness = 1;   ///< stroke of the ink, pixels (the outline adds 2)
  int w = 0, h = 0;    ///< bounding box of the outlined glyphs, pixels
  int ascent = 0;      ///< from the box top to the baseline, pixels
};
/// Metrics of `text` at cap height font_px (pixels, ≥ 6).
TextMetrics measure_text(const std::string& text, int font_px);

/// Renders a laid-out scene: background scene.background, scene.n_strokes distractor strokes, objects in
/// list order (later ones on top), then texts. Draws the background's randomness from rng.
/// @return RGB image, CV_8UC3, scene.height rows × scene.width columns.
/// @throws InvalidArgument for an unknown background kind or a non-positive size.
cv::Mat render_scene(const Scene& scene, Rng& rng);

}  // namespace vispco::eval::synthvqa
