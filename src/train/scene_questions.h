// Every SynthVQA question an existing scene answers, in the benchmark's exact templates (eval/synthvqa/
// families.cpp), so one rendered image can carry several question/answer turns when the bundled model is
// trained (its 576 visual tokens are then paid once for many answers).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eval/synthvqa/rng.h"
#include "eval/synthvqa/scene.h"

namespace vispco::train {

/// One question about a scene, with its answer, family name and the objects it is about.
struct QaPair {
  std::string family, question, answer;
  /// Indices into scene.objects of the objects the answer depends on: the named object (color, shape), every
  /// object of the counted kind (count_*), the objects of the asked kind (exist "yes"; none for "no"), both
  /// objects of a pair (spatial, size); empty for text. Grounding targets for training.
  std::vector<int> objects;
};

/// All answerable questions of `scene`, by family: color/shape (objects unique by shape/colour), count_shape
/// and count_color (kinds present), exist (every present colour–shape pair; absent pairs, preferring ones
/// whose colour and shape both occur), spatial and size (pairs of objects unique by kind with a clear
/// relation / different size class), text (every string; by ink when there are several).
std::vector<QaPair> all_questions(const eval::synthvqa::Scene& scene);

/// Up to `n` questions drawn from all_questions(), cycling over families in random order so each family
/// appears as evenly as the scene allows, and yes/no balanced within exist. Deterministic given `rng`.
/// `weights` (family name → k ≥ 1, default 1; exist covers its yes and no questions) lets a family contribute
/// up to k questions per cycle — more turns of the families a model is slow to learn; empty = the plain draw.
std::vector<QaPair> sample_questions(const eval::synthvqa::Scene& scene, eval::synthvqa::Rng& rng, size_t n,
                                     const std::map<std::string, int64_t>& weights = {});

}  // namespace vispco::train
