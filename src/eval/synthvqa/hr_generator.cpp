// SynthVQA-HR per-sample pipeline: canvas → family draft → distractor strings → layout → render.
#include "eval/synthvqa/hr_generator.h"

#include <string>
#include <utility>
#include <vector>

#include "eval/synthvqa/families.h"
#include "eval/synthvqa/hr_families.h"
#include "eval/synthvqa/hr_layout.h"
#include "eval/synthvqa/hr_scene.h"
#include "eval/synthvqa/render.h"
#include "eval/synthvqa/rng.h"

namespace vispco::eval::synthvqa {
namespace {
/// Mixed into the sample seed of every HR sample ("SYNTH-HR" in ASCII).
constexpr uint64_t kHrStreamSalt = 0x53594E54482D4852ull;
/// Distractor strokes per 336×336 tile of canvas area (SynthVQA draws 4–14 on its one 336² image).
constexpr int kMinStrokesPerTile = 4, kMaxStrokesPerTile = 14;

/// The backgrounds HR scenes use: every kind but "dots", whose 2–5 px dots would pass for tiny circles.
const std::vector<const char*>& hr_backgrounds() {
  static const std::vector<const char*> t = [] {
    std::vector<const char*> names;
    for (const BackgroundInfo& b : background_table())
      if (std::string(b.name) != "dots") names.push_back(b.name);
    return names;
  }();
  return t;
}
}  // namespace

uint64_t hr_sample_seed(uint64_t seed, uint64_t index) {
  return splitmix64(sample_seed(seed, index) ^ kHrStreamSalt);
}

SynthSample make_hr_sample(uint64_t seed, uint64_t index) {
  const auto& families = hr_family_table();
  const FamilyInfo& family = families[index % families.size()];
  const size_t slot = (index / families.size()) % family.n_slots;
  Rng rng(hr_sample_seed(seed, index));

  const HrCanvas& canvas = pick_canvas(rng);
  Draft draft = family.build(rng, slot);
  if (draft.texts.empty()) add_distractor_texts(draft, rng, kHrText);
  hr_layout(draft, canvas, rng);

  SynthSample s = sample_from_draft(index, family.name, std::move(draft), rng);
  s.scene.width = canvas.width;
  s.scene.height = canvas.height;
  s.scene.background = rng.pick(hr_backgrounds());
  const int n_tiles = canvas.n_cols() * canvas.n_rows();
  s.scene.n_strokes = rng.uniform_int(kMinStrokesPerTile * n_tiles, kMaxStrokesPerTile * n_tiles);
  s.rgb = render_scene(s.scene, rng);
  return s;
}

}  // namespace vispco::eval::synthvqa
