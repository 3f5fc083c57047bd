// Word-level grounding supervision for training the bundled model's decoder from scratch. A decoder without
// language pre-training does not learn to find the object a question names among several (binding) within
// this machine's budget (docs/bundled-model-training.md); this auxiliary loss teaches it directly: at the
// token where an object word of the question ends ("star", "red", "circles"), one attention head of the first
// decoder layers must put its mass on the visual tokens that show the objects the question is about — the
// way grounded VLMs are trained on region–phrase pairs (e.g. Kosmos-2, Peng et al. 2023; Shikra, Chen et al.
// 2023), here as an attention target instead of box tokens. Inference is unchanged. This file holds what the
// grounding losses read — object words, recorded attention rows, answer-grounding targets of a question; the
// losses themselves are in train/losses/ (word_grounding_loss.h, answer_grounding_loss.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "eval/synthvqa/scene.h"
#include "io/tokenizer.h"
#include "model/token_state.h"
#include "train/scene_questions.h"

namespace vispco::train {

/// Indices i in [begin, end) of `ids` of the tokens in which a SynthVQA object word ends: a colour name,
/// shape name or shape plural (eval/synthvqa/scene.h tables) standing as a whole word in the text decoded
/// from ids[begin, end) (a piece may carry the word and the punctuation after it, "▁star?"). Ids outside the
/// vocabulary (the image placeholder) are skipped. @throws InvalidArgument when begin > end or end >
/// ids.size().
std::vector<int64_t> object_word_ends(const io::Tokenizer& tok, const std::vector<int64_t>& ids, size_t begin,
                                      size_t end);

/// A PrefillHook that prunes nothing and records the attention probabilities of given query rows at given
/// decoder layers (differentiable: they stay in the autograd graph).
class AttentionRowRecorder : public PrefillHook {
 public:
  /// @param layers decoder layers to record (each < L − 1: a layer's rows arrive before the next layer)
  /// @param rows [B, R] int64 query positions into the prefill sequence.
  AttentionRowRecorder(std::set<int64_t> layers, at::Tensor rows);
  bool acts_before(int64_t layer) const override;
  at::Tensor attention_rows(int64_t layer, const TokenState& state) override;
  bool apply(int64_t layer, TokenState& state, const LayerSignals& signals) override;
  /// [B, H, R, T] fp32 attention probabilities of each recorded layer, in layer order.
  const std::vector<at::Tensor>& recorded() const { return recorded_; }
  /// Also keep the hidden states at the rows after decoder layer `layer` (< L − 1), with their graph.
  void record_hidden_after(int64_t layer) { hidden_after_ = layer; }
  /// [B, R, D] the rows' hidden states after that layer, or undefined.
  const at::Tensor& hidden() const { return hidden_; }
  /// Also keep the whole hidden state entering decoder layer `layer` (≥ 0; 0 = the embeddings), with its
  /// graph.
  void record_input_of(int64_t layer) { input_of_ = layer; }
  /// [B, T, D] the hidden state entering that layer, or undefined.
  const at::Tensor& layer_input() const { return input_; }

 private:
  std::set<int64_t> layers_;
  at::Tensor rows_;
  std::vector<at::Tensor> recorded_;
  int64_t hidden_after_ = -1;
  at::Tensor hidden_;
  int64_t input_of_ = -1;
  at::Tensor input_;
};

/// Answer-position grounding (the second supervision of the intermediate step): at the last prompt token of a
/// turn — the one that predicts the answer — head h of the grounded layers should spread its attention evenly
/// over the objects in heads[h] (each object's share spread evenly over its patches), with one more share on
/// the BOS token when `sink` is set. The sink makes a count readable from the attention output (mass 1/(n+1)
/// stays on BOS for n objects) and gives "no" answers somewhere to look. Measured on oracle object tokens,
/// this took colour questions from chance to 0.99 in 500 steps where word-level grounding alone stayed at
/// chance (docs/bundled-model-training.md, session 7).
struct AnswerGrounding {
  std::vector<std::vector<std::vector<int64_t>>> heads;  ///< [head][object] → grid patches of that object
  bool sink = false;                                     ///< one share on BOS
  /// Text questions: [character of the answer] → grid patches of that glyph. One head
  /// (ConversationOptions::glyph_head, head 0 unless set) at the row that predicts each answer token attends
  /// evenly to the glyphs the token spells (reading in order), not only at the first answer token.
  std::vector<std::vector<int64_t>> glyphs;
  /// Readout targets of the answer row (ConversationOptions::readout), NaN where the family has none:
  /// [0, 1] = (x_A − x_B, y_A − y_B) / image size for spatial questions (the relation is the sign of the
  /// larger one), [2] = n / 6 for counts.
  std::array<float, 3> readout = {NAN, NAN, NAN};
  bool empty() const;  ///< no head has a target, no sink, no glyphs
};

/// Which refinements answer_grounding_of() applies.
struct AnswerGroundingOptions {
  /// Count and exist questions ground each object on its centre patch alone: one key per object, so under
  /// equal logits the sink's share is exactly 1/(n + 1) whatever the objects' sizes (over whole footprints a
  /// large object takes more of the softmax mass than a small one unless the logits learn its area).
  bool count_centres = false;
  /// Count questions ground on the counted objects' footprints with no sink (for towers that classify each
  /// object's count of its colour and shape, patch_labels.h patch_extra_labels()); the count is then read
  /// from the attended tokens' values, as a colour is. Takes precedence over count_centres for counts.
  bool count_footprints = false;
  /// Text questions get per-glyph targets (AnswerGrounding::glyphs) for the asked string.
  bool text_glyphs = false;
};

/// The answer grounding of a SynthVQA question: color/shape → head 0 on the named object; count_* → head 0 on
/// every counted object plus the sink; exist → head 0 on the matching objects plus the sink (only the sink
/// for "no"); spatial/size → head 0 on the first named object, head 1 on the second; text and others → none.
/// With options (AnswerGroundingOptions): centre patches for counts, glyph targets for text (the string whose
/// text is the answer; none when no string matches).
/// @param grid patches per side. @throws InvalidArgument for an object index outside the scene.
AnswerGrounding answer_grounding_of(const QaPair& q, const eval::synthvqa::Scene& scene, int64_t grid,
                                    const AnswerGroundingOptions& options = {});

}  // namespace vispco::train
