// Answer grounding on LLaVA-NeXT's packed visual tokens (see hr_grounding.h).
#include "train/hr/hr_grounding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "model/llava_next/pack.h"
#include "train/hr/hr_views.h"

namespace vispco::train {

using namespace eval::synthvqa;

std::vector<int64_t> hr_feature_to_token(const AnyresGeometry& g) {
  const int64_t rows = (1 + g.n_tiles()) * g.n_base();
  std::vector<int64_t> out(static_cast<size_t>(rows), -1);
  const auto index = anyres_pack_index(g);
  const auto a = index.accessor<int64_t, 1>();
  for (int64_t k = 0; k < index.size(0); ++k)
    if (a[k] < rows) out[static_cast<size_t>(a[k])] = k;
  return out;
}

namespace {

// An image's views and its feature → token map, built once and shared by the token finders below: patch
// (r, c) of view v is token tokens[v·n² + r·n + c] (−1 where unpadding dropped it).
struct TokenMap {
  std::vector<HrView> views;
  std::vector<int64_t> tokens;
  int64_t n = 0;    // patches per tile side
  double cell = 0;  // view pixels per patch

  TokenMap(const Scene& scene, const AnyresGeometry& g, int64_t side)
      : views(hr_views(scene, side)),
        tokens(hr_feature_to_token(g)),
        n(g.grid),
        cell(double(side) / double(g.grid)) {
    if (static_cast<int64_t>(views.size()) != 1 + g.n_tiles())
      throw InvalidArgument("HR grounding: the scene has " + std::to_string(views.size() - 1) +
                            " tiles, the geometry " + std::to_string(g.n_tiles()));
  }
  // Appends patch (r, c) of view v's token to `out` when the patch exists and reaches the decoder.
  void add(std::vector<int64_t>& out, size_t v, int64_t r, int64_t c) const {
    if (r < 0 || r >= n || c < 0 || c >= n) return;
    const int64_t t = tokens[v * size_t(n * n) + size_t(r * n + c)];
    if (t >= 0) out.push_back(t);
  }
};

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<int64_t> object_tokens(const TokenMap& m, const SceneObject& o, bool centre_only) {
  std::vector<int64_t> out;
  for (size_t v = 0; v < m.views.size(); ++v) {
    const HrView& w = m.views[v];
    if (!centre_only) {
      const double rr = 0.75 * o.radius;
      for (int64_t r = 0; r < m.n; ++r)
        for (int64_t c = 0; c < m.n; ++c) {
          const double dx = w.x0 + (c + 0.5) * m.cell * w.sx - o.x,
                       dy = w.y0 + (r + 0.5) * m.cell * w.sy - o.y;
          if (dx * dx + dy * dy <= rr * rr) m.add(out, v, r, c);
        }
    }
    if (v == 0) continue;  // the centre patch of the tile that holds the centre
    m.add(out, v, static_cast<int64_t>(std::floor((o.y - w.y0) / (m.cell * w.sy))),
          static_cast<int64_t>(std::floor((o.x - w.x0) / (m.cell * w.sx))));
  }
  return sorted_unique(std::move(out));
}

std::vector<int64_t> glyph_tokens(const TokenMap& m, const SceneText& t, size_t c) {
  if (c >= t.text.size())
    throw InvalidArgument("hr_glyph_tokens: character " + std::to_string(c) + " of a " +
                          std::to_string(t.text.size()) + "-character text");
  const double x0 = t.x + double(t.w) * double(c) / double(t.text.size()),
               x1 = t.x + double(t.w) * double(c + 1) / double(t.text.size());
  const double y0 = t.y, y1 = t.y + t.h, xm = (x0 + x1) / 2, ym = (y0 + y1) / 2;
  std::vector<int64_t> out;
  for (size_t v = 1; v < m.views.size(); ++v) {  // tiles: 1 canvas px per view px
    const HrView& w = m.views[v];
    for (int64_t r = 0; r < m.n; ++r)
      for (int64_t col = 0; col < m.n; ++col) {
        const double px = w.x0 + (col + 0.5) * m.cell, py = w.y0 + (r + 0.5) * m.cell;
        if (px >= x0 && px < x1 && py >= y0 && py < y1) m.add(out, v, r, col);
      }
    m.add(out, v, static_cast<int64_t>(std::floor((ym - w.y0) / m.cell)),
          static_cast<int64_t>(std::floor((xm - w.x0) / m.cell)));
  }
  return sorted_unique(std::move(out));
}

}  // namespace

std::vector<int64_t> hr_object_tokens(const Scene& scene, const SceneObject& o, const AnyresGeometry& g,
                                      int64_t side, bool centre_only) {
  return object_tokens(TokenMap(scene, g, side), o, centre_only);
}

std::vector<int64_t> hr_glyph_tokens(const Scene& scene, const SceneText& t, size_t c,
                                     const AnyresGeometry& g, int64_t side) {
  return glyph_tokens(TokenMap(scene, g, side), t, c);
}

HrTurnGrounding hr_turn_grounding(const QaPair& q, const Scene& scene, const AnyresGeometry& g,
                                  int64_t side) {
  const bool count = q.family == "large_count" || q.family == "tiny_count";
  const bool named = q.family == "large_color" || q.family == "tiny_color" || q.family == "large_shape" ||
                     q.family == "tiny_shape";
  HrTurnGrounding out;
  if (q.family != "text" && !count && !named) return out;
  const TokenMap map(scene, g, side);  // once per turn, for all its objects or glyphs
  if (q.family == "text") {
    for (const auto& t : scene.texts)
      if (t.text == q.answer &&
          (scene.texts.size() == 1 || q.question.find(" " + t.color + " ") != std::string::npos)) {
        for (size_t c = 0; c < t.text.size(); ++c) out.glyphs.push_back(glyph_tokens(map, t, c));
        break;
      }
    return out;
  }
  for (int i : q.objects) {
    if (i < 0 || i >= static_cast<int>(scene.objects.size()))
      throw InvalidArgument("hr_turn_grounding: object " + std::to_string(i) + " outside a scene of " +
                            std::to_string(scene.objects.size()));
    auto tokens = object_tokens(map, scene.objects[size_t(i)], count);
    if (!tokens.empty()) out.objects.push_back(std::move(tokens));
  }
  out.sink = count;
  return out;
}

}  // namespace vispco::train
