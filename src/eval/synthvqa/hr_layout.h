// SynthVQA-HR placement: where the strings and objects of a draft go on a high-resolution canvas. Tiny
// objects and strings lie wholly inside one 336-px tile (so one AnyRes tile sees each whole); nothing
// overlaps.
#pragma once
#include "eval/synthvqa/families.h"
#include "eval/synthvqa/hr_scene.h"
#include "eval/synthvqa/rng.h"

namespace vispco::eval::synthvqa {

/// Places the draft's strings (boxes from render.h measure_text), then its large objects, then its tiny
/// objects, each uniformly over the positions allowed on `canvas` (pixels, origin top-left):
///  - strings: box inside one tile with kHrTileMargin to spare, ≥ kHrTextTextGap from other strings;
///  - large objects: footprint circle inside the image with 2 px to spare (x − r ≥ 2, x + r ≤ width − 3);
///  - tiny objects: footprint circle inside one tile with kHrTileMargin to spare;
///  - any two objects: centre distance ≥ r_i + r_j + kHrObjectGap; object to string box ≥ r + kHrTextGap.
/// Retries whole layouts on a dead end. The draft's spatial constraint (rel_a) is not supported (−1).
/// @throws Error if no layout is found after many restarts (a bug in a family's object counts).
void hr_layout(Draft& draft, const HrCanvas& canvas, Rng& rng);

}  // namespace vispco::eval::synthvqa
