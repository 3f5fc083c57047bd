// The teacher-forced input of a decoder training step, built in one place: visual tokens from the frozen
// tower, every turn's prompt and answer ids laid out as LLaVA-1.5's conversation template ("USER:
// <image>\n{q} ASSISTANT: {a}</s>USER: {q} ASSISTANT: …"), next-token targets, the prefill state, and where
// each id and grid patch sits in the sequence — the positions every stage-2 loss (train/losses/) reads its
// rows from.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/token_state.h"
#include "train/grounding.h"

namespace vispco::train {

/// One image's conversation: (question, answer) turns in order.
using Conversation = std::vector<std::pair<std::string, std::string>>;

/// The visual tokens the decoder trains on: the tower's features (no gradient: the tower is frozen in the
/// decoder stages) through the projector, then, when given, only the `visual_keep` tokens (in original
/// order), then, for pool > 1, average-pooled pool × pool over the patch grid.
/// @param images [B, 3, S, S] preprocessed @param pool ≥ 1, must divide the patch grid side
/// @param visual_keep [B, K] int64 indices into the N_v tokens, or undefined for all
/// @return [B, N_v', D] compute dtype, with the projector's graph (N_v' = K, N_v / pool², or N_v).
/// @throws InvalidArgument when pool does not divide the grid side.
at::Tensor decoder_visual_tokens(VisionLanguageModel& m, const at::Tensor& images, int64_t pool,
                                 const at::Tensor& visual_keep);

/// Where one row's ids and grid patches sit in the prefill sequence (build_prefill_state's layout: left
/// padding, the image placeholder expanded to the visual tokens).
struct SequenceMap {
  int64_t pad = 0;    ///< left padding of the row
  int64_t image = 0;  ///< index into the row's ids of the image placeholder
  int64_t n_v = 0;    ///< visual tokens of the row
  /// [N_grid] each grid patch's index among the n_v visual tokens fed to the decoder, −1 when none is (not
  /// kept); pooled patches share their pool cell's token.
  std::vector<int64_t> patch_token;
  /// Sequence position of ids index i.
  int64_t position(int64_t i) const { return pad + (i < image ? i : i + n_v - 1); }
  /// Sequence position of grid patch `patch`'s visual token, or −1 (outside the grid, or not fed).
  int64_t key(int64_t patch) const {
    return patch >= 0 && patch < static_cast<int64_t>(patch_token.size()) &&
                   patch_token[static_cast<size_t>(patch)] >= 0
               ? pad + image + patch_token[static_cast<size_t>(patch)]
               : int64_t{-1};
  }
};

/// A text-answer token that spells characters: the row that predicts it and the characters it spells.
struct GlyphRow {
  int64_t row = 0;                      ///< index into ids of the token that predicts answer token j
  size_t turn = 0, begin = 0, end = 0;  ///< the turn and the answer characters [begin, end) token j spells
  int64_t token = 0;                    ///< answer token j (the glyph readout's target)
};

/// What build_teacher_forced_batch() records besides ids and targets.
struct TeacherForcedOptions {
  /// Targets on every text token after the image (the questions too), not only on the answers and EOS.
  bool text_loss = false;
  /// Record where each question's object words end (object_word_ends(); word grounding).
  bool object_words = false;
  /// The answer row of a turn is the row predicting the answer's first token that spells a character (for
  /// "3" = "▁" "3" the row emitting "3"), not the last prompt token.
  bool answer_row_at_first_glyph = false;
  /// [B][turn] answer grounding, or null: a turn whose `glyphs` are non-empty gets glyph rows.
  const std::vector<std::vector<AnswerGrounding>>* turn_answers = nullptr;
  int64_t pool = 1;        ///< as given to decoder_visual_tokens() (maps grid patches to tokens)
  at::Tensor visual_keep;  ///< as given to decoder_visual_tokens()
};

/// A batch of conversations laid out for one teacher-forced prefill.
struct TeacherForcedBatch {
  /// Per image: prompt_ids = every turn's prompt, answer and EOS; pixels unset (the visual tokens are given).
  std::vector<VlmRequest> reqs;
  std::vector<std::vector<int64_t>> answer_pos;  ///< [B][…] indices into ids of the tokens to predict
  /// [B][…] (index into ids of a token in which an object word ends, turn); with object_words only.
  std::vector<std::vector<std::pair<int64_t, size_t>>> object_words;
  std::vector<std::vector<int64_t>> answer_rows;  ///< [B][turn] index into ids of the turn's answer row
  std::vector<std::vector<GlyphRow>> glyph_rows;  ///< [B][…] glyph rows of the turns with glyph targets
  std::vector<SequenceMap> maps;                  ///< [B] where ids and patches sit in the sequence
  TokenState state;                               ///< the prefill state, [B, T, …]
  at::Tensor target;  ///< [B, T] int64 (CPU): the id each position predicts, −100 where none
  int64_t n_v = 0;    ///< visual tokens per image
  int64_t T = 0;      ///< padded sequence length
  int64_t batch() const { return static_cast<int64_t>(reqs.size()); }
};

/// Lays out `turns` (one conversation per image) around `visual`: turn 0 as llava_prompt_ids(), later
/// turns as llava_followup_ids() ("USER: {q} ASSISTANT:"), each answer tokenised on its own and followed by
/// EOS; then the prefill state (build_prefill_state) and the targets (answer_targets).
/// @param visual [B, N_v', D] decoder_visual_tokens() @param turns [B] conversations, each ≥ 1 turn.
/// Precondition: options.turn_answers, when set, has an entry for every turn (conversation_loss checks it).
/// @throws InvalidArgument from build_prefill_state/answer_targets (a prompt without its image placeholder).
TeacherForcedBatch build_teacher_forced_batch(VisionLanguageModel& m, const at::Tensor& visual,
                                              const std::vector<Conversation>& turns,
                                              const TeacherForcedOptions& options);

/// The query rows an AttentionRowRecorder records for the stage-2 losses, per image in this order: the
/// object-word rows (`words`), then each turn's answer row and then the glyph rows (`answers`).
struct QueryRows {
  at::Tensor rows;  ///< [B, R] int64 sequence positions (0 in unused slots; R ≥ 1, the longest row list)
  std::vector<int64_t> first_answer;  ///< [B] slot of the first answer row
  std::vector<int64_t> first_glyph;   ///< [B] slot of the first glyph row
  int64_t R = 1;                      ///< slots per image
};

/// The query rows of `batch` (see QueryRows). @param words include the object-word rows
/// @param answers include the answer and glyph rows.
QueryRows query_rows(const TeacherForcedBatch& batch, bool words, bool answers);

}  // namespace vispco::train
