// Every SynthVQA-HR question an existing high-resolution scene answers, in the benchmark's exact templates
// (eval/synthvqa/hr_families.h), so that one rendered HR image — about 2,900 visual tokens — carries several
// question/answer turns when the bundled high-resolution model is trained.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "eval/synthvqa/rng.h"
#include "eval/synthvqa/scene.h"
#include "train/scene_questions.h"

namespace vispco::train {

/// All answerable SynthVQA-HR questions of `scene`, grouped by family in hr_family_table() order:
///   large_color / tiny_color  each object of that size class whose shape is unique in the class;
///   large_shape / tiny_shape  each object of that size class whose colour is unique in the class;
///   large_count               each colour present among the large objects 1–4 times;
///   tiny_count                each shape present among the tiny objects 1–4 times;
///   text                      each string ("What does the text say?" when it is the only one, else by ink).
/// Counts above 4 are left out: the benchmark's count answers are 1–4. QaPair::objects holds the objects
/// (or nothing, for text) the answer is about. Objects of size class small are ignored (HR scenes have none).
std::vector<QaPair> hr_all_questions(const eval::synthvqa::Scene& scene);

/// Up to `n` of hr_all_questions(scene): families visited in a random order, one question each per cycle
/// (a random one of the family's), until n are drawn or none is left. Deterministic given `rng`.
std::vector<QaPair> sample_hr_questions(const eval::synthvqa::Scene& scene, eval::synthvqa::Rng& rng,
                                        size_t n);

/// Whether `answer` is spelled, as a whole word and ignoring case, in `text` (a question before it): then a
/// later turn could copy it instead of reading the image ("What color is the tiny star?" → "red", then
/// "What shape is the tiny red object?" → "star" is answered by the first question).
bool names_answer(const std::string& text, const std::string& answer);

/// One image's training conversation (stage 2 of the HR recipe): `first` (the sample's own question), then
/// questions of sample_hr_questions(scene, rng, all) in their drawn order, skipping `first`'s duplicate and
/// every question whose answer an earlier turn's question names (names_answer), until `turns` are drawn or
/// none is left. Deterministic given `rng`.
std::vector<QaPair> hr_conversation(const QaPair& first, const eval::synthvqa::Scene& scene,
                                    eval::synthvqa::Rng& rng, size_t turns);

}  // namespace vispco::train
