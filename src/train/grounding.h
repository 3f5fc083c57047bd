// Word-level grounding supervision for training the bundled model's decoder from scratch. A decoder without
// language pre-training does not learn to find the object a question names among several (binding) within
// this machine's budget (docs/bundled-model-training.md); this auxiliary loss teaches it directly: at the
// token where an object word of the question ends ("star", "red", "circles"), one attention head of the first
// decoder layers must put its mass on the visual tokens that show the objects the question is about — the
// way grounded VLMs are trained on region–phrase pairs (e.g. Kosmos-2, Peng et al. 2023; Shikra, Chen et al.
// 2023), here as an attention target instead of box tokens. Inference is unchanged.
#pragma once
#include <ATen/core/Tensor.h>

#include <set>
#include <vector>

#include "io/tokenizer.h"
#include "model/token_state.h"

namespace vispco::train {

/// Indices i in [begin, end) of `ids` of the tokens in which a SynthVQA object word ends: a colour name, shape
/// name or shape plural (eval/synthvqa/scene.h tables) standing as a whole word in the text decoded from
/// ids[begin, end) (a piece may carry the word and the punctuation after it, "▁star?"). Ids outside the
/// vocabulary (the image placeholder) are skipped. @throws InvalidArgument when begin > end or end > ids.size().
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

 private:
  std::set<int64_t> layers_;
  at::Tensor rows_;
  std::vector<at::Tensor> recorded_;
};

/// Grounding loss: for each recorded layer, head 0, and each query row with a target, −log of the attention
/// mass on its target keys; averaged over those rows and layers.
/// @param probs per layer [B, H, R, T] fp32 @param target [B, R, T] bool, the keys each row should attend to
/// @return scalar fp32; 0 (without a graph) when no row has a target. @throws InvalidArgument on shape mismatch.
at::Tensor grounding_loss(const std::vector<at::Tensor>& probs, const at::Tensor& target);

}  // namespace vispco::train
