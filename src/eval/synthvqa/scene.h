// SynthVQA scene vocabulary and description: shapes, named colours, size classes, the objects and text
// strings of one image (336×336 for SynthVQA, a tiling resolution such as 672×672 for SynthVQA-HR), and its
// JSON form (stored with every sample so answers can be re-derived).
// CLEVR-like (Johnson et al., CVPR 2017); the data side spells "color" as CLEVR and VQA do.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace vispco::eval::synthvqa {

/// Side of every SynthVQA image, pixels (LLaVA-1.5's input size: 24×24 patches of 14 px).
inline constexpr int kImageSize = 336;

enum class Shape { kCircle, kSquare, kTriangle, kDiamond, kStar, kCross };
enum class Colour { kRed, kGreen, kBlue, kYellow, kPurple, kOrange, kPink, kBrown };
/// kSmall and kLarge are SynthVQA's; kTiny exists only in SynthVQA-HR scenes (hr_scene.h).
enum class SizeClass { kSmall, kLarge, kTiny };

/// One row of the shape table: its name in questions and answers, and its plural.
struct ShapeInfo {
  Shape shape;
  const char* name;
  const char* plural;
};
/// One row of the colour table: its name and its nominal RGB (objects jitter around it by ≤ 12 per channel).
struct ColourInfo {
  Colour colour;
  const char* name;
  std::array<uint8_t, 3> rgb;
};
/// One row of the size table: name and circumradius range in pixels (inclusive). Small objects are 28–36 px
/// across and large ones 50–64 px, i.e. 2–4.5 ViT patches of 14 px; the ranges do not overlap, so "bigger"
/// is never ambiguous. Tiny objects (SynthVQA-HR only) are 12–16 px across at full resolution: about one
/// patch of a 336-px tile, 4–8 px along a downscaled axis of the 336-px base view of an HR image.
struct SizeInfo {
  SizeClass size;
  const char* name;
  int min_radius;
  int max_radius;
};

/// One ink of the text table: name, RGB fill and the RGB of its 1-px outline (opposite luminance).
struct InkInfo {
  const char* name;
  std::array<uint8_t, 3> rgb;
  std::array<uint8_t, 3> outline;
};

/// The vocabulary tables (one registry per attribute; order = enum order). SynthVQA draws sizes from the
/// first kSynthVqaSizeClasses rows only.
const std::vector<ShapeInfo>& shape_table();
const std::vector<ColourInfo>& colour_table();
const std::vector<SizeInfo>& size_table();
/// Size classes SynthVQA draws from (small, large): size_table()'s first rows.
inline constexpr size_t kSynthVqaSizeClasses = 2;
/// Inks of the text strings: black, white, red, blue, yellow.
const std::vector<InkInfo>& ink_table();
/// Characters text strings are drawn from: digits 2–9 and consonants without the look-alikes of digits
/// (no vowels, so no string is an English word, an article or "yes"/"no"; no S, Z, B, Q, I, O).
inline constexpr const char* kTextAlphabet = "23456789CDFGHJKLMNPRTVWXY";

const ShapeInfo& info(Shape s);
const ColourInfo& info(Colour c);
const SizeInfo& info(SizeClass s);
/// Parse a name of the tables above. @throws FormatError naming the valid names.
Shape parse_shape(const std::string& name);
Colour parse_colour(const std::string& name);
SizeClass parse_size(const std::string& name);

/// One drawn object. Its footprint lies inside the circle (x, y, radius).
struct SceneObject {
  Shape shape = Shape::kCircle;
  Colour colour = Colour::kRed;
  SizeClass size = SizeClass::kSmall;
  /// Centre, pixels from the top-left corner (x right, y down), in [radius, width − 1 − radius] ×
  /// [radius, height − 1 − radius].
  int x = 0, y = 0;
  /// Circumradius, pixels, within size_table()'s range for `size`.
  int radius = 0;
  /// Fill colour actually drawn (RGB): the nominal colour plus a small jitter.
  std::array<uint8_t, 3> rgb{};
};

/// One short string of 2–4 upper-case letters or digits drawn small (cap height 12–20 px in SynthVQA,
/// 8–10 px in SynthVQA-HR).
struct SceneText {
  std::string text;
  /// Ink name (an ink_table() name); an outline of the opposite luminance keeps it legible on the
  /// cluttered background.
  std::string color;
  /// Nominal cap height of the font, pixels, in [12, 20] (SynthVQA) or [10, 12] (SynthVQA-HR); render.h
  /// measure_text turns it into a scale.
  int font_px = 0;
  /// Bounding box of the glyphs (outline included), pixels: top-left (x, y), width w, height h.
  int x = 0, y = 0, w = 0, h = 0;
};

/// Everything drawn in one image, enough to re-derive every answer. Background parameters are recorded
/// for documentation; rendering takes them from the sample's random stream.
struct Scene {
  /// Image size, pixels: kImageSize² for SynthVQA, one of hr_scene.h's canvases for SynthVQA-HR.
  int width = kImageSize, height = kImageSize;
  std::vector<SceneObject> objects;
  std::vector<SceneText> texts;
  /// Background texture kind (render.h registry name) and the number of distractor strokes.
  std::string background;
  int n_strokes = 0;
};

/// JSON form: {"width","height","background","n_strokes","objects":[{"shape","color","size","x","y",
/// "radius","rgb"}],"texts":[{"text","color","font_px","x","y","w","h"}]}; integers only, so it prints
/// identically everywhere.
nlohmann::json scene_to_json(const Scene& scene);
/// Inverse of scene_to_json. @throws FormatError on a missing field or unknown name.
Scene scene_from_json(const nlohmann::json& j);

}  // namespace vispco::eval::synthvqa
