// SynthVQA-HR samples: high-resolution scenes (hr_scene.h canvases, 672–1008 px, five aspect ratios) with
// large objects the 336-px base view sees and tiny objects and small text only the full-resolution AnyRes
// tiles resolve. Sample i of seed S is a pure function of (S, i), like SynthVQA's (generator.h).
#pragma once
#include <cstdint>

#include "eval/synthvqa/generator.h"

namespace vispco::eval::synthvqa {

/// Bumped whenever a change alters any byte SynthVQA-HR generates; recorded in its manifests. Independent
/// of kGeneratorVersion.
inline constexpr int kHrGeneratorVersion = 1;

/// The random stream of SynthVQA-HR sample `index` of seed `seed`: rng.h sample_seed mixed with a constant,
/// so an HR sample and the SynthVQA sample of the same (seed, index) draw unrelated numbers.
uint64_t hr_sample_seed(uint64_t seed, uint64_t index);

/// Sample `index` of SynthVQA-HR dataset `seed`: canvas drawn with hr_canvas_table()'s weights, family =
/// index mod 7 (hr_family_table() order), answer slot = (index div 7) mod the family's slot count, so
/// families and answers are balanced to ±1. Backgrounds: render.h's kinds except "dots" (its dots would pass
/// for tiny circles); 4–14 distractor strokes per tile. The record's scene holds width and height (pixels);
/// rgb is CV_8UC3, height × width.
SynthSample make_hr_sample(uint64_t seed, uint64_t index);

}  // namespace vispco::eval::synthvqa
