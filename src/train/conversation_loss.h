// The stage-2 loss of the bundled model's decoder training (`vispco train`, prune-then-fine-tune): the
// cross-entropy of the answer tokens given everything before them (LLaVA's instruction tuning, Liu et al.
// 2023, §4.2) over one teacher-forced prefill (train/teacher_forced_batch.h), plus the auxiliary losses of
// train/losses/ that a stage turns on by weight — word grounding, answer grounding, the answer-row readout,
// the glyph readout and the glyph value loss — each reading the attention rows or hidden states it supervises
// from one recorder in the same forward.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/llava/llava.h"
#include "model/token_state.h"
#include "train/grounding.h"
#include "train/teacher_forced_batch.h"

namespace vispco::train {

/// Loss of stage 2 for a batch of conversations, exposed for tests: mean cross-entropy of the answer tokens
/// (and their EOS) given everything before them. @param images [B, 3, S, S] preprocessed.
/// @param pool > 1 average-pools the projected visual tokens pool × pool over the patch grid first (the
/// low-resolution stages); must divide the grid side. @throws InvalidArgument otherwise.
/// @param visual_keep [B, K] int64 indices into the N_v visual tokens to train on (kept in original order;
/// the foreground curriculum), or undefined for all.
at::Tensor conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                             const std::vector<Conversation>& turns, int64_t pool = 1,
                             const at::Tensor& visual_keep = {});

/// What a stage-2 loss adds to the answer-token loss.
struct ConversationOptions {
  int64_t pool = 1;  ///< as conversation_loss()'s pool
  /// Prune-then-fine-tune: a hook that removes visual tokens inside the forward (prune/replay_hook.h), the
  /// targets following the surviving tokens by their original positions. Only with pool 1, no visual_keep and
  /// no grounding or readout (they address token positions of the unpruned sequence).
  PrefillHook* prune_hook = nullptr;
  at::Tensor visual_keep;  ///< as conversation_loss()'s visual_keep
  /// Also predict every text token after the image (the questions too), as language-model pre-training does:
  /// a deviation from LLaVA's answer-only loss that gives a from-scratch decoder far more gradient through
  /// its attention to the visual tokens ("What color is the ___" needs the scene). Curriculum stages only.
  bool text_loss = false;
  /// Weight of the grounding loss (train/grounding.h) added to the token loss; 0 = off.
  double grounding = 0;
  /// Decoder layers whose head 0 is grounded (each < L − 1).
  std::set<int64_t> grounding_layers = {0, 1};
  /// [B][turn] patches (indices into the N_v grid, object_patches()) showing what each turn is about; needed
  /// when grounding > 0 (a turn with none is not grounded).
  std::vector<std::vector<std::vector<int64_t>>> turn_patches;
  /// Weight of the answer-position grounding loss (grounding.h AnswerGrounding, attention_target_loss); 0 =
  /// off.
  double answer_grounding = 0;
  /// Decoder layers whose heads are grounded at the answer position (each < L − 1).
  std::set<int64_t> answer_grounding_layers = {3};
  /// [B][turn] what each turn's answer position attends to; needed when answer_grounding > 0 (an empty entry
  /// is not grounded).
  std::vector<std::vector<AnswerGrounding>> turn_answers;
  /// Weight of the answer-row readout loss, ≥ 0 (0 = off; needs answer_grounding > 0 for the rows): a linear
  /// head (training only, `readout_head`, D → 3) reads the hidden state after decoder layer `readout_layer`
  /// at each turn's answer row and regresses AnswerGrounding::readout (the two objects' offset for spatial
  /// questions, the count for counting ones) by mean squared error — the intermediate step those families
  /// need, supervised where the answer is computed.
  double readout = 0;
  /// The decoder layer whose output the readout reads, in [0, L − 1).
  int64_t readout_layer = 4;
  /// The readout head, D → 3 (fp32, trained with the decoder); needed when readout > 0.
  torch::nn::Linear readout_head{nullptr};
  /// Weight of the glyph readout, ≥ 0 (0 = off; needs answer_grounding > 0 and per-glyph targets in
  /// turn_answers): at the row that predicts each token of a text answer — where `glyph_head` of the grounded
  /// layer attends to the glyphs the token spells — the hidden state after decoder layer `readout_layer`,
  /// through the decoder's final norm and LM head, predicts that token (cross-entropy, mean over such rows).
  /// The counterpart of `readout` for text: the glyph's identity supervised where the grounded head has just
  /// read it, not only through the layers above (a logit-lens / deep-supervision loss;
  /// docs/bundled-model-training.md, session 20). Its gradient also reaches the final norm and the LM head,
  /// which the model's own output uses: it pulls them towards decoding layer-`readout_layer` states too.
  double glyph_readout = 0;
  /// The head of the grounded layers that attends to a text answer's glyphs, in [0, H). Head 0 also reads
  /// colours, shapes and counts; under grouped-query attention the heads sharing its key/value head share its
  /// value projection, whose D_h dimensions then carry every family's attribute (session 20 measured that a
  /// linear probe reads 38 % of glyphs from that value projection where the hidden state entering the layer
  /// gives 73 %). A head of another key/value group gives glyphs a value projection of their own.
  int64_t glyph_head = 0;
  /// Weight of the glyph value loss, ≥ 0 (0 = off; needs answer_grounding > 0 with its layers, a
  /// glyph_value_head and patch_glyphs): at every visual token that shows a glyph, the value that
  /// `glyph_head` of the first grounded layer reads there — its key/value group's D_h columns of v_proj
  /// applied to the layer's normed input — classifies the glyph through glyph_value_head (cross-entropy, mean
  /// over those tokens). Grounding makes the head look at the right glyph; this makes what it reads there the
  /// glyph's identity (session 20: a linear probe reads 39–46 % of glyphs from that projection, 76 % from the
  /// layer's input). Supervising an intermediate representation with a linear classifier is deep supervision
  /// (Lee et al. 2015, "Deeply-Supervised Nets", §2).
  double glyph_value = 0;
  /// The glyph value head, D_h → 25 glyph classes (fp32, training only); needed when glyph_value > 0.
  torch::nn::Linear glyph_value_head{nullptr};
  /// [B, N_grid] int64: each grid patch's glyph class (patch_labels()'s char column, 0 = none, 1…25); needed
  /// when glyph_value > 0.
  at::Tensor patch_glyphs;
  /// Answer grounding and readout act at the row that predicts the answer's first token spelling a character,
  /// not at the last prompt token. Llama-style tokenizers split digits, so "3" is "▁" "3": the last prompt
  /// token predicts the bare "▁", and the count is emitted one row later. Without this the count is
  /// supervised where it is not used and must be copied a row on unsupervised. Word answers ("▁red") are one
  /// token: unchanged.
  bool answer_row_at_first_glyph = false;
};

/// The parts of a stage-2 loss, fp32 scalars: total = token + grounding weight · grounding + answer weight ·
/// answer + readout weight · readout + glyph readout weight · glyph + glyph value weight · glyph_value (a
/// part that is off is 0).
struct ConversationLoss {
  at::Tensor total, token, grounding, answer, readout, glyph, glyph_value;
  /// Targets the token loss averaged over (its positions with a target other than −100), ≥ 0: what a
  /// data-parallel step weighs each rank's mean by (train/finetune.h).
  int64_t n_targets = 0;
};

/// Stage-2 loss with the options above: cross-entropy of the answer tokens (or, with text_loss, of every text
/// token after the image; train/losses/token_loss.h) plus, each weighted where its weight is > 0, the word
/// grounding loss at the object words of each question (losses/word_grounding_loss.h), the answer-position
/// grounding loss (losses/answer_grounding_loss.h), the answer-row readout (losses/readout_loss.h), the glyph
/// readout (losses/glyph_readout_loss.h) and the glyph value loss (losses/glyph_value_loss.h).
/// @param images [B, 3, S, S] preprocessed @param turns [B] conversations, each ≥ 1 turn.
/// @throws InvalidArgument as conversation_loss(), or when grounding > 0 (answer_grounding > 0) and
/// turn_patches (turn_answers) does not have one entry per turn, or when readout > 0 without answer
/// grounding, its layers or a readout_head, when glyph_readout > 0 without answer grounding and its layers,
/// with readout_layer outside [0, L − 1), with glyph_head outside [0, H), when glyph_value > 0 without
/// answer grounding and its layers, a glyph_value_head or patch_glyphs of shape [B, N_grid], or when a
/// prune_hook comes with pooling, visual_keep or recorded (grounding) layers.
ConversationLoss conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                                   const std::vector<Conversation>& turns, const ConversationOptions& opts);

}  // namespace vispco::train
