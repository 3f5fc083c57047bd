// The data of one training step, drawn from SynthVQA: the images and their pixel batch (a step's images
// depend only on the stage's data seed, the step and the batch size, so a resumed run sees exactly what an
// uninterrupted one would), and for the decoder stages each image's conversation — its own question first,
// then sampled ones — with the grounding targets the stage's losses need.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "eval/synthvqa/generator.h"
#include "model/llava/llava.h"
#include "train/grounding.h"
#include "train/recipe.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// The images of one step.
struct SynthBatch {
  std::vector<eval::synthvqa::SynthSample> samples;  ///< [B]
  at::Tensor images;                                 ///< [B, 3, S, S] fp32 preprocessed, on the device
  /// [B] the samples' scenes (pointers into `samples`).
  std::vector<const eval::synthvqa::Scene*> scenes() const;
};

/// Samples step · batch … step · batch + batch − 1 of SynthVQA seed `data_seed` (with `min_texts`,
/// generator.h SampleOptions), preprocessed by `m` and stacked onto `device`.
SynthBatch draw_synth_batch(const VisionLanguageModel& m, uint64_t data_seed, int64_t step, int64_t batch,
                            int min_texts, c10::Device device);

/// The conversations of a decoder step and their grounding targets.
struct SynthConversations {
  std::vector<Conversation> turns;  ///< [B] the sample's own question, then up to n_turns − 1 others
  /// [B][turn] grid patches of the objects each question is about (object_patches()); empty per turn unless
  /// the stage's grounding > 0.
  std::vector<std::vector<std::vector<int64_t>>> turn_patches;
  /// [B][turn] answer grounding (answer_grounding_of() with the stage's options); empty unless the stage's
  /// answer_grounding > 0.
  std::vector<std::vector<AnswerGrounding>> turn_answers;
  /// [B, N_grid] int64 each patch's glyph class (patch_labels()'s char column); defined only when the stage's
  /// glyph_value > 0.
  at::Tensor patch_glyphs;
};

/// The conversations of a decoder step over `samples` (SynthBatch::samples of step `step`): for image b,
/// sample_questions() of its scene with an Rng of sample_seed(seed, step · B + b), `st.turn_weights`, the
/// sample's own question left out and put first.
/// @param n_turns turns per image, ≥ 1 (TrainRecipe::turns) @param grid patches per side.
SynthConversations synth_conversations(const std::vector<eval::synthvqa::SynthSample>& samples, uint64_t seed,
                                       int64_t step, int64_t n_turns, const StageSettings& st, int64_t grid);

}  // namespace vispco::train
