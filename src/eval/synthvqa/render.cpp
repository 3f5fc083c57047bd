// SynthVQA rendering: background registry, lighting, strokes, grain, objects and text.
// Every coordinate and colour is computed with integers or IEEE-exact double operations (+ − × ÷ √), so the
// pixels do not depend on the C library's transcendental functions.
#include "eval/synthvqa/render.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco::eval::synthvqa {
namespace {

using Rgb = cv::Vec3b;

uint8_t clamp8(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// A muted colour: a grey level in [70, 190] with every channel within ±30 of it (low saturation, so no
// background hue competes with the named object colours).
Rgb muted(Rng& rng) {
  const int g = rng.uniform_int(70, 190);
  return Rgb(clamp8(g + rng.uniform_int(-30, 30)), clamp8(g + rng.uniform_int(-30, 30)),
             clamp8(g + rng.uniform_int(-30, 30)));
}
// A colour within ±spread of base on every channel.
Rgb near(Rng& rng, Rgb base, int spread) {
  Rgb c;
  for (int k = 0; k < 3; ++k) c[k] = clamp8(base[k] + rng.uniform_int(-spread, spread));
  return c;
}
// a + (b − a)·t/255, t in [0, 255].
Rgb mix(Rgb a, Rgb b, int t) {
  Rgb c;
  for (int k = 0; k < 3; ++k) c[k] = clamp8(a[k] + (b[k] - a[k]) * t / 255);
  return c;
}
cv::Scalar scalar(Rgb c) { return cv::Scalar(c[0], c[1], c[2]); }

// A direction with small integer components, not both zero.
cv::Point direction(Rng& rng) {
  for (;;) {
    cv::Point d(rng.uniform_int(-3, 3), rng.uniform_int(-3, 3));
    if (d.x != 0 || d.y != 0) return d;
  }
}

// Smooth value noise in [0, 255] of size rows × cols: random lattice values every `cell` pixels (drawn row by
// row), bilinear in fixed point.
cv::Mat1b value_noise(Rng& rng, int cell, int rows, int cols) {
  const int nx = cols / cell + 2, ny = rows / cell + 2;
  std::vector<int> lattice(static_cast<size_t>(nx * ny));
  for (int& v : lattice) v = rng.uniform_int(0, 255);
  cv::Mat1b out(rows, cols);
  for (int y = 0; y < rows; ++y) {
    const int gy = y / cell, fy = y % cell;
    for (int x = 0; x < cols; ++x) {
      const int gx = x / cell, fx = x % cell;
      const int v00 = lattice[gy * nx + gx], v10 = lattice[gy * nx + gx + 1];
      const int v01 = lattice[(gy + 1) * nx + gx], v11 = lattice[(gy + 1) * nx + gx + 1];
      const int v = (v00 * (cell - fx) * (cell - fy) + v10 * fx * (cell - fy) + v01 * (cell - fx) * fy +
                     v11 * fx * fy) /
                    (cell * cell);
      out(y, x) = static_cast<uint8_t>(v);
    }
  }
  return out;
}

// Linear ramp along direction d, mapped to [0, 255] over an image of size rows × cols.
int ramp(cv::Point d, int x, int y, int rows, int cols) {
  const int lo = std::min(0, d.x * (cols - 1)) + std::min(0, d.y * (rows - 1));
  const int hi = std::max(0, d.x * (cols - 1)) + std::max(0, d.y * (rows - 1));
  return (d.x * x + d.y * y - lo) * 255 / (hi - lo);
}

void paint_gradient(cv::Mat& img, Rng& rng) {
  const Rgb a = muted(rng), b = near(rng, a, 70);
  const cv::Point d = direction(rng);
  const cv::Mat1b noise = value_noise(rng, rng.uniform_int(20, 48), img.rows, img.cols);
  const Rgb c = near(rng, a, 40);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x)
      img.at<Rgb>(y, x) = mix(mix(a, b, ramp(d, x, y, img.rows, img.cols)), c, noise(y, x) / 2);
}

void paint_stripes(cv::Mat& img, Rng& rng) {
  const Rgb a = muted(rng), b = near(rng, a, 45);
  const cv::Point d = direction(rng);
  const int period = rng.uniform_int(6, 24), duty = rng.uniform_int(2, period - 2);
  const int offset = rng.uniform_int(0, 10000);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x)
      img.at<Rgb>(y, x) = ((d.x * x + d.y * y + offset) % period < duty) ? a : b;
}

void paint_checker(cv::Mat& img, Rng& rng) {
  const Rgb a = muted(rng), b = near(rng, a, 40);
  const int cell = rng.uniform_int(8, 28), ox = rng.uniform_int(0, cell), oy = rng.uniform_int(0, cell);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x) img.at<Rgb>(y, x) = (((x + ox) / cell + (y + oy) / cell) % 2) ? a : b;
}

void paint_blotches(cv::Mat& img, Rng& rng) {
  const Rgb a = muted(rng), b = near(rng, a, 80), c = near(rng, a, 50);
  const cv::Mat1b coarse = value_noise(rng, rng.uniform_int(24, 56), img.rows, img.cols);
  const cv::Mat1b fine = value_noise(rng, rng.uniform_int(6, 14), img.rows, img.cols);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x) img.at<Rgb>(y, x) = mix(mix(a, b, coarse(y, x)), c, fine(y, x) / 3);
}

void paint_rings(cv::Mat& img, Rng& rng) {
  const Rgb a = muted(rng), b = near(rng, a, 50);
  const int cx = rng.uniform_int(-120, img.cols + 120), cy = rng.uniform_int(-120, img.rows + 120);
  const int period = rng.uniform_int(8, 22);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x) {
      const double r = std::sqrt(static_cast<double>((x - cx) * (x - cx) + (y - cy) * (y - cy)));
      const int band = static_cast<int>(r) % (2 * period);
      img.at<Rgb>(y, x) = mix(a, b, band < period ? band * 255 / period : (2 * period - band) * 255 / period);
    }
}

void paint_dots(cv::Mat& img, Rng& rng) {
  paint_gradient(img, rng);
  const Rgb base = img.at<Rgb>(img.rows / 2, img.cols / 2);
  const int spacing = rng.uniform_int(12, 26), radius = rng.uniform_int(2, 5);
  for (int y = spacing / 2; y < img.rows; y += spacing)
    for (int x = spacing / 2; x < img.cols; x += spacing) {
      const cv::Point c(x + rng.uniform_int(-3, 3), y + rng.uniform_int(-3, 3));
      cv::circle(img, c, radius, scalar(near(rng, base, 60)), cv::FILLED, cv::LINE_AA);
    }
}

// Slow lighting variation: multiplies every pixel by a factor in [0.78, 1].
void add_lighting(cv::Mat& img, Rng& rng) {
  const cv::Mat1b light = value_noise(rng, rng.uniform_int(60, 120), img.rows, img.cols);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x) {
      Rgb& p = img.at<Rgb>(y, x);
      const int f = 200 + light(y, x) * 55 / 255;
      for (int k = 0; k < 3; ++k) p[k] = static_cast<uint8_t>(p[k] * f / 255);
    }
}

// Thin lines, polylines, arcs and small rectangles in random colours, drawn under the objects.
void add_strokes(cv::Mat& img, Rng& rng, int n_strokes) {
  for (int i = 0; i < n_strokes; ++i) {
    const Rgb colour = rng.bernoulli(0.3)
                           ? Rgb(clamp8(rng.uniform_int(0, 255)), clamp8(rng.uniform_int(0, 255)),
                                 clamp8(rng.uniform_int(0, 255)))
                           : near(rng, muted(rng), 60);
    const int thickness = rng.uniform_int(1, 2);
    const auto point = [&] {
      return cv::Point(rng.uniform_int(0, img.cols - 1), rng.uniform_int(0, img.rows - 1));
    };
    switch (rng.uniform_int(0, 3)) {
      case 0: {
        const cv::Point p = point();
        cv::line(img, p, p + cv::Point(rng.uniform_int(-120, 120), rng.uniform_int(-120, 120)),
                 scalar(colour), thickness, cv::LINE_AA);
        break;
      }
      case 1: {
        std::vector<cv::Point> pts{point()};
        const int n = rng.uniform_int(3, 5);
        for (int k = 1; k < n; ++k)
          pts.push_back(pts.back() + cv::Point(rng.uniform_int(-60, 60), rng.uniform_int(-60, 60)));
        cv::polylines(img, pts, false, scalar(colour), thickness, cv::LINE_AA);
        break;
      }
      case 2: {
        const int start = rng.uniform_int(0, 359);
        cv::ellipse(img, point(), cv::Size(rng.uniform_int(10, 80), rng.uniform_int(10, 80)),
                    rng.uniform_int(0, 179), start, start + rng.uniform_int(60, 240), scalar(colour),
                    thickness, cv::LINE_AA);
        break;
      }
      default: {
        const cv::Point p = point();
        cv::rectangle(img, p, p + cv::Point(rng.uniform_int(8, 40), rng.uniform_int(8, 40)), scalar(colour),
                      thickness, cv::LINE_AA);
      }
    }
  }
}

// Per-pixel grain of ±amplitude on each channel (8 draws of one 64-bit output per pixel channel group).
void add_grain(cv::Mat& img, Rng& rng, int amplitude) {
  const int span = 2 * amplitude + 1;
  const int n_bytes = img.cols * 3;
  for (int y = 0; y < img.rows; ++y) {
    uint8_t* row = img.ptr<uint8_t>(y);
    for (int i = 0; i < n_bytes; i += 8) {
      uint64_t bits = rng.next();
      for (int k = i; k < std::min(i + 8, n_bytes); ++k, bits >>= 8)
        row[k] = clamp8(row[k] + static_cast<int>(bits & 255) % span - amplitude);
    }
  }
}

// Unit vertex tables (y down, circumradius ≤ 1): fixed literals so no trigonometry runs at draw time.
struct Vertex {
  double x, y;
};
const std::vector<Vertex>& polygon(Shape shape) {
  static const std::vector<Vertex> kSquare{{-0.7, -0.7}, {0.7, -0.7}, {0.7, 0.7}, {-0.7, 0.7}};
  static const std::vector<Vertex> kTriangle{{0.0, -1.0}, {0.866025, 0.5}, {-0.866025, 0.5}};
  static const std::vector<Vertex> kDiamond{{0.0, -1.0}, {0.7, 0.0}, {0.0, 1.0}, {-0.7, 0.0}};
  // Five-pointed star: outer points at −90° + k·72°, inner points (radius 0.5) half-way between.
  static const std::vector<Vertex> kStar{{0.0, -1.0},           {0.293893, -0.404508}, {0.951057, -0.309017},
                                         {0.475528, 0.154508},  {0.587785, 0.809017},  {0.0, 0.5},
                                         {-0.587785, 0.809017}, {-0.475528, 0.154508}, {-0.951057, -0.309017},
                                         {-0.293893, -0.404508}};
  static const std::vector<Vertex> kCross{{-0.33, -0.9}, {0.33, -0.9}, {0.33, -0.33}, {0.9, -0.33},
                                          {0.9, 0.33},   {0.33, 0.33}, {0.33, 0.9},   {-0.33, 0.9},
                                          {-0.33, 0.33}, {-0.9, 0.33}, {-0.9, -0.33}, {-0.33, -0.33}};
  static const std::vector<Vertex> kNone;
  switch (shape) {
    case Shape::kSquare:
      return kSquare;
    case Shape::kTriangle:
      return kTriangle;
    case Shape::kDiamond:
      return kDiamond;
    case Shape::kStar:
      return kStar;
    case Shape::kCross:
      return kCross;
    case Shape::kCircle:
      return kNone;
  }
  return kNone;
}

constexpr int kShift = 4;  // fractional bits of polygon vertices

void draw_object(cv::Mat& img, const SceneObject& o) {
  const Rgb fill(o.rgb[0], o.rgb[1], o.rgb[2]);
  const Rgb edge(static_cast<uint8_t>(fill[0] * 45 / 100), static_cast<uint8_t>(fill[1] * 45 / 100),
                 static_cast<uint8_t>(fill[2] * 45 / 100));
  const int outline = o.size == SizeClass::kTiny ? 1 : 2;  // pixels; a 2-px outline would swamp a tiny shape
  if (o.shape == Shape::kCircle) {
    cv::circle(img, {o.x, o.y}, o.radius, scalar(fill), cv::FILLED, cv::LINE_AA);
    cv::circle(img, {o.x, o.y}, o.radius, scalar(edge), outline, cv::LINE_AA);
    return;
  }
  std::vector<cv::Point> pts;
  for (const Vertex& v : polygon(o.shape))
    pts.emplace_back(static_cast<int>(std::llround((o.x + o.radius * v.x) * (1 << kShift))),
                     static_cast<int>(std::llround((o.y + o.radius * v.y) * (1 << kShift))));
  const std::vector<std::vector<cv::Point>> polys{pts};
  cv::fillPoly(img, polys, scalar(fill), cv::LINE_AA, kShift);
  cv::polylines(img, polys, true, scalar(edge), outline, cv::LINE_AA, kShift);
}

const InkInfo& find_ink(const std::string& name) {
  for (const InkInfo& ink : ink_table())
    if (name == ink.name) return ink;
  throw InvalidArgument("unknown SynthVQA text ink '" + name + "'");
}

void draw_text(cv::Mat& img, const SceneText& t) {
  const TextMetrics m = measure_text(t.text, t.font_px);
  const InkInfo& ink = find_ink(t.color);
  const cv::Point org(t.x + 1, t.y + m.ascent);
  cv::putText(img, t.text, org, cv::FONT_HERSHEY_SIMPLEX, m.scale,
              cv::Scalar(ink.outline[0], ink.outline[1], ink.outline[2]), m.thickness + 2, cv::LINE_AA);
  cv::putText(img, t.text, org, cv::FONT_HERSHEY_SIMPLEX, m.scale,
              cv::Scalar(ink.rgb[0], ink.rgb[1], ink.rgb[2]), m.thickness, cv::LINE_AA);
}

}  // namespace

const std::vector<BackgroundInfo>& background_table() {
  static const std::vector<BackgroundInfo> t{{"gradient", paint_gradient}, {"stripes", paint_stripes},
                                             {"checker", paint_checker},   {"blotches", paint_blotches},
                                             {"rings", paint_rings},       {"dots", paint_dots}};
  return t;
}

const BackgroundInfo& find_background(const std::string& name) {
  return find_named(background_table(), name, "SynthVQA background");
}

TextMetrics measure_text(const std::string& text, int font_px) {
  static const int kBaseHeight = cv::getTextSize("H", cv::FONT_HERSHEY_SIMPLEX, 1.0, 1, nullptr).height;
  TextMetrics m;
  m.scale = static_cast<double>(font_px) / kBaseHeight;
  m.thickness = font_px >= 17 ? 2 : 1;
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, m.scale, m.thickness + 2, &baseline);
  m.w = size.width + 2;
  m.ascent = size.height + 1;
  m.h = size.height + 2 + (m.thickness + 2) / 2;
  return m;
}

cv::Mat render_scene(const Scene& scene, Rng& rng) {
  if (scene.width < 1 || scene.height < 1)
    throw InvalidArgument("SynthVQA render: image size must be positive, got " + std::to_string(scene.width) +
                          "×" + std::to_string(scene.height));
  cv::Mat img(scene.height, scene.width, CV_8UC3);
  find_background(scene.background).paint(img, rng);
  add_lighting(img, rng);
  add_strokes(img, rng, scene.n_strokes);
  add_grain(img, rng, 3);
  for (const SceneObject& o : scene.objects) draw_object(img, o);
  for (const SceneText& t : scene.texts) draw_text(img, t);
  return img;
}

}  // namespace vispco::eval::synthvqa
