// SynthVQA-HR placement by rejection sampling: a tile is drawn first for tile-bound items (all tiles offer
// the same room, so this is uniform over the allowed positions), then a position inside it.
#include "eval/synthvqa/hr_layout.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"

namespace vispco::eval::synthvqa {
namespace {

constexpr int kTriesPerItem = 400;
constexpr int kRestarts = 200;

// Start, pixels, of a tile drawn uniformly among the canvas's n tiles along one axis.
int random_tile_start(Rng& rng, int n_tiles) { return rng.uniform_int(0, n_tiles - 1) * kHrTileSize; }

// Strings: a box inside one tile drawn uniformly (families.h place_texts).
bool place_hr_texts(Draft& d, const HrCanvas& canvas, Rng& rng) {
  return place_texts(d, kHrTextTextGap, [&](SceneText& t) {
    const int tx = random_tile_start(rng, canvas.n_cols()), ty = random_tile_start(rng, canvas.n_rows());
    t.x = tx + rng.uniform_int(kHrTileMargin, kHrTileSize - kHrTileMargin - t.w);
    t.y = ty + rng.uniform_int(kHrTileMargin, kHrTileSize - kHrTileMargin - t.h);
  });
}

// A candidate centre for o: anywhere in the image for large objects, inside one tile for tiny ones.
void propose_centre(SceneObject& o, const HrCanvas& canvas, Rng& rng) {
  if (o.size == SizeClass::kTiny) {
    const int tx = random_tile_start(rng, canvas.n_cols()), ty = random_tile_start(rng, canvas.n_rows());
    const int lo = o.radius + kHrTileMargin, hi = kHrTileSize - 1 - o.radius - kHrTileMargin;
    o.x = tx + rng.uniform_int(lo, hi);
    o.y = ty + rng.uniform_int(lo, hi);
  } else {
    o.x = rng.uniform_int(o.radius + 2, canvas.width - 3 - o.radius);
    o.y = rng.uniform_int(o.radius + 2, canvas.height - 3 - o.radius);
  }
}

bool place_objects(Draft& d, const HrCanvas& canvas, Rng& rng) {
  // Large objects first: they need the most room.
  std::vector<size_t> order;
  for (size_t i = 0; i < d.objects.size(); ++i)
    if (d.objects[i].size != SizeClass::kTiny) order.push_back(i);
  for (size_t i = 0; i < d.objects.size(); ++i)
    if (d.objects[i].size == SizeClass::kTiny) order.push_back(i);
  for (size_t n_placed = 0; n_placed < order.size(); ++n_placed) {
    SceneObject& o = d.objects[order[n_placed]];
    bool placed = false;
    for (int k = 0; k < kTriesPerItem && !placed; ++k) {
      propose_centre(o, canvas, rng);
      const int rt = o.radius + kHrTextGap;
      placed = std::all_of(d.texts.begin(), d.texts.end(), [&](const SceneText& t) {
        return rect_distance2(o.x, o.y, t.x, t.y, t.w, t.h) >= rt * rt;
      });
      for (size_t j = 0; j < n_placed && placed; ++j) {
        const SceneObject& p = d.objects[order[j]];
        const int dx = o.x - p.x, dy = o.y - p.y, rr = o.radius + p.radius + kHrObjectGap;
        placed = dx * dx + dy * dy >= rr * rr;
      }
    }
    if (!placed) return false;
  }
  return true;
}

}  // namespace

void hr_layout(Draft& draft, const HrCanvas& canvas, Rng& rng) {
  if (draft.rel_a >= 0) throw Error("SynthVQA-HR layout: spatial constraints are not supported");
  for (int attempt = 0; attempt < kRestarts; ++attempt)
    if (place_hr_texts(draft, canvas, rng) && place_objects(draft, canvas, rng)) return;
  throw Error("SynthVQA-HR layout: no placement found for " + std::to_string(draft.objects.size()) +
              " objects and " + std::to_string(draft.texts.size()) + " strings on " + canvas.name() +
              " after " + std::to_string(kRestarts) + " restarts");
}

}  // namespace vispco::eval::synthvqa
