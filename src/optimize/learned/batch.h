// Batches for VisPCO training and prediction: SynthVQA samples (eval/synthvqa/generator.h make_sample, from
// seeds other than the calib/test splits) as LLaVA prompts with their answer teacher-forced, laid out by
// model/generate.h build_prefill_state (left padding), with the indices training needs: visual tokens, the
// last prompt token (FastV's scoring query), the positions that predict answer tokens, and the prompt mask
// the predictor pools over (never the answer).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/token_state.h"
#include "model/vlm.h"

namespace vispco::optimize::learned {

/// One question about one image, tokenised.
struct PromptSample {
  at::Tensor pixels;  ///< [3, S, S] fp32, preprocessed; unused when `visual` is set
  at::Tensor visual;  ///< [N_v, D] projected visual tokens, when already encoded (else undefined)
  std::vector<int64_t> prompt_ids;  ///< LLaVA-1.5 prompt with one image placeholder
  std::vector<int64_t> answer_ids;  ///< answer tokens followed by EOS (empty for prediction-only use)
  std::string family;               ///< SynthVQA family
};

/// SynthVQA sample `index` of dataset `seed` as a PromptSample (question and answer of the sample).
PromptSample synthvqa_prompt_sample(VisionLanguageModel& m, uint64_t seed, uint64_t index, bool with_answer);

/// A laid-out batch.
struct PromptBatch {
  TokenState state;       ///< [B, T, …] prefill input (embeddings, positions, masks)
  at::Tensor pool;        ///< [B, T] bool: valid prompt tokens (up to the last prompt token)
  at::Tensor visual_pos;  ///< [B, N_v] int64 indices into T of the visual tokens
  at::Tensor query_pos;   ///< [B] int64 index into T of the last prompt token
  at::Tensor n_text;      ///< [B] int64 text tokens of the prompt (BOS included, placeholder not)
  std::vector<at::Tensor>
      predict_pos;  ///< per row [A_b] int64 indices into T whose logits predict answer tokens
  std::vector<at::Tensor> answer_ids;  ///< per row [A_b] int64 the answer tokens (EOS included)
};

/// Encodes the images (vision tower + projector, frozen, no autograd) of the samples without `visual` and
/// lays the batch out; with answers appended after each prompt when the samples have them. Tensors on the
/// model's device.
/// @throws InvalidArgument for an empty batch or a prompt without exactly one image placeholder.
PromptBatch make_prompt_batch(VisionLanguageModel& m, const std::vector<PromptSample>& samples);

/// Encodes the image of every sample that has no `visual` yet and stores it there (dropping the pixels), so
/// that batches built later skip the vision tower and the image rendering. @return `samples`.
std::vector<PromptSample>& encode_visual(VisionLanguageModel& m, std::vector<PromptSample>& samples);

}  // namespace vispco::optimize::learned
