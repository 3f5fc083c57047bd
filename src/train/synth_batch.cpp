// The data of one training step, drawn from SynthVQA (see synth_batch.h).
#include "train/synth_batch.h"

#include <ATen/ATen.h>

#include "eval/synthvqa/rng.h"
#include "train/patch_labels.h"
#include "train/scene_questions.h"

namespace vispco::train {

std::vector<const eval::synthvqa::Scene*> SynthBatch::scenes() const {
  std::vector<const eval::synthvqa::Scene*> out;
  for (const auto& s : samples) out.push_back(&s.scene);
  return out;
}

SynthBatch draw_synth_batch(const VisionLanguageModel& m, uint64_t data_seed, int64_t step, int64_t batch,
                            int min_texts, c10::Device device) {
  SynthBatch out;
  std::vector<at::Tensor> px;
  for (int64_t b = 0; b < batch; ++b) {
    out.samples.push_back(eval::synthvqa::make_sample(data_seed, static_cast<uint64_t>(step * batch + b),
                                                      {.min_texts = min_texts}));
    px.push_back(m.preprocess(out.samples.back().rgb));
  }
  out.images = at::stack(px).to(device);
  return out;
}

SynthConversations synth_conversations(const std::vector<eval::synthvqa::SynthSample>& samples, uint64_t seed,
                                       int64_t step, int64_t n_turns, const StageSettings& st, int64_t grid) {
  const auto batch = static_cast<int64_t>(samples.size());
  SynthConversations out;
  // Patches of the objects a question is about (grounding targets).
  auto patches_of = [&](const eval::synthvqa::Scene& scene, const std::vector<int>& objects) {
    std::vector<int64_t> patches;
    for (int o : objects)
      for (auto p : object_patches(scene, static_cast<size_t>(o), grid)) patches.push_back(p);
    return patches;
  };
  const AnswerGroundingOptions grounding_options{.count_centres = st.count_centres,
                                                 .count_footprints = st.count_footprints,
                                                 .text_glyphs = st.text_glyphs};
  if (st.glyph_value > 0) {
    std::vector<at::Tensor> glyphs;
    for (const auto& smp : samples) glyphs.push_back(patch_labels(smp.scene, grid).select(1, 4));
    out.patch_glyphs = at::stack(glyphs);  // [B, N_grid]
  }
  for (int64_t b = 0; b < batch; ++b) {
    eval::synthvqa::Rng rng(eval::synthvqa::sample_seed(seed, static_cast<uint64_t>(step * batch + b)));
    const auto& sample = samples[static_cast<size_t>(b)];
    const auto& scene = sample.scene;
    Conversation conv = {{sample.question, sample.answer}};
    std::vector<std::vector<int64_t>> refs(1);
    std::vector<AnswerGrounding> answers(1);
    const bool need_objects = st.grounding > 0 || st.answer_grounding > 0;
    if (need_objects)
      for (const auto& q : all_questions(scene))
        if (q.question == sample.question) {
          if (st.grounding > 0) refs[0] = patches_of(scene, q.objects);
          if (st.answer_grounding > 0) answers[0] = answer_grounding_of(q, scene, grid, grounding_options);
        }
    for (const auto& q : sample_questions(scene, rng, static_cast<size_t>(n_turns - 1), st.turn_weights))
      if (q.question != sample.question) {
        conv.push_back({q.question, q.answer});
        refs.push_back(st.grounding > 0 ? patches_of(scene, q.objects) : std::vector<int64_t>{});
        answers.push_back(st.answer_grounding > 0 ? answer_grounding_of(q, scene, grid, grounding_options)
                                                  : AnswerGrounding{});
      }
    out.turns.push_back(conv);
    out.turn_patches.push_back(std::move(refs));
    if (st.answer_grounding > 0) out.turn_answers.push_back(std::move(answers));
  }
  return out;
}

}  // namespace vispco::train
