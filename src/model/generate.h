// Generation for LLaVA-style models: batched prefill with left padding, then KV-cache decode; greedy or
// temperature / top-p sampling with a seed; stop at EOS or after max_new_tokens. An optional PrefillHook
// (a pruning plan) removes visual tokens inside the prefill; decode then runs on the pruned cache unchanged.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/vlm.h"

namespace vispco {

/// Decoding settings (a plain value: defaults, validate(), JSON round trip, equality over all fields).
struct GenerationConfig {
  /// Most tokens generated per request, ≥ 1.
  int64_t max_new_tokens = 32;
  /// Softmax temperature; 0 means greedy (argmax). Valid: ≥ 0.
  double temperature = 0.0;
  /// Nucleus sampling mass in (0, 1]; 1 disables the filter. Used only when temperature > 0.
  double top_p = 1.0;
  /// Seed of the sampler (one CPU generator per call, so results do not depend on the device).
  uint64_t seed = 0;
  /// Stop a row when it emits EOS (the EOS id is not part of the output).
  bool stop_at_eos = true;

  /// @throws InvalidArgument naming the bad field and value.
  void validate() const;
  bool operator==(const GenerationConfig&) const = default;
};
nlohmann::json to_json(const GenerationConfig& c);
/// @throws InvalidArgument for unknown keys or bad values.
GenerationConfig generation_config_from_json(const nlohmann::json& j);

/// One request: an image and its prompt ids (exactly one config.image_token_index placeholder).
struct VlmRequest {
  at::Tensor pixels;                ///< [3, S, S] fp32, preprocessed (VisionLanguageModel::preprocess)
  std::vector<int64_t> prompt_ids;  ///< e.g. VisionLanguageModel::prompt_ids(question)
  /// Optional: this image's tower output already computed (encode_images(…, true) row: embeds [N_v, D],
  /// cls_attention [N_v], keys [N_v, D_v]), e.g. by a keep=auto K prediction. When every request of a batch
  /// has it, generate() skips the vision tower (stats.vision_ms is then ~0).
  VisualTokens visual;
};

/// Measurements of one generate() call (the whole batch).
struct GenerationStats {
  int64_t batch = 0;          ///< B
  int64_t n_visual = 0;       ///< N_v per request before pruning
  int64_t n_visual_kept = 0;  ///< visual tokens per request after the last pruning stage
  /// Per request, in request order: its own N_v and its visual tokens after the last pruning stage (images of
  /// one batch may differ: dynamic resolution, tiling); n_visual / n_visual_kept above are the largest.
  std::vector<int64_t> row_n_visual, row_n_visual_kept;
  int64_t n_text_max = 0;                 ///< longest N_t in the batch (prompt text tokens, incl. BOS)
  std::vector<int64_t> tokens_per_layer;  ///< sequence length entering each decoder layer in prefill
  double vision_ms = 0;                   ///< vision tower + projector
  double prepass_ms = 0;           ///< gradient pre-pass of a plan that needs it (model/saliency.h), else 0
  double prefill_ms = 0;           ///< decoder prefill + first logits
  double ttft_ms = 0;              ///< time to first token: vision + pre-pass + prefill + first sampling
  double decode_ms = 0;            ///< all decode steps after the first token
  int64_t n_generated = 0;         ///< tokens generated over the batch (incl. the first)
  double decode_tokens_per_s = 0;  ///< tokens generated after the first, per second of decode, whole batch
  int64_t kv_cache_bytes =
      0;  ///< KV cache buffer bytes, the peak over the generation (finished rows leave it)
  nlohmann::json to_json() const;
};

/// Result of generate(): one token list and text per request, in request order.
struct GenerationOutput {
  std::vector<std::vector<int64_t>> tokens;  ///< generated ids (EOS excluded)
  std::vector<std::string> texts;            ///< decoded, whitespace-trimmed
  /// Why each row ended, in OpenAI's words: "stop" (EOS, or the token callback ended it) or "length"
  /// (max_new_tokens reached).
  std::vector<std::string> finish_reasons;
  GenerationStats stats;
  /// When asked: [B, V] fp32 logits of every step; rows that had already finished are NaN.
  std::vector<at::Tensor> step_logits;
};

/// Called for each token a row generates (EOS excluded), in order, as soon as it is sampled: `row` indexes
/// the request list. Returning false ends that row after this token (a stop sequence matched, the client
/// went away); its finish reason is then "stop".
using TokenCallback = std::function<bool(size_t row, int64_t token)>;

/// Builds the decoder's prefill input for a batch: each row's prompt embeddings with its N_v visual tokens
/// spliced in at the image placeholder, rows left-padded to the longest (padding invalid, zeros). RoPE
/// positions count valid tokens from 0 ([B, T]); for a model with 3 position axes (M-RoPE, Qwen2-VL §2.1)
/// they are [3, B, T]: a text token's position p on every axis, visual token (r, c) of the grid at (p₀, p₀ +
/// r, p₀ + c) where p₀ is the image's first position, and the text after the image from p₀ + max(rows, cols).
/// @param visual [B, N_v, D], every row of one layout @param layout the images' layout (N_v = its n_tokens,
/// its grid for M-RoPE positions); n_tokens = 0 means visual.size(1) tokens on the shape's default grid.
/// @return TokenState of [B, T_max, …]. @throws InvalidArgument when a prompt does not hold exactly one image
/// placeholder, or the layout does not match the tokens (or, for M-RoPE, its grid holds another count).
TokenState build_prefill_state(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                               const at::Tensor& visual, const VisualLayout& layout = {});

/// Generates for a batch of requests with one decoding config. Batching is by left padding with key masks;
/// rows finish independently and a finished row leaves the decode batch (its KV-cache rows are dropped), so
/// the remaining rows step on without it. @param hook optional pruning plan acting inside the prefill.
/// @param record_logits keep each step's logits.
/// @throws InvalidArgument for an empty batch, a bad config or a prompt without its image placeholder.
GenerationOutput generate(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                          const GenerationConfig& gc, PrefillHook* hook = nullptr,
                          bool record_logits = false);

/// As above with one decoding config per row (max_new_tokens, temperature, top_p, seed, stop_at_eos): each
/// row samples with its own generator seeded by its own seed, so a row's tokens equal those it gets alone
/// (greedy exactly; sampled up to the batched logits' rounding). @param on_token optional per-token callback.
/// @throws InvalidArgument also when row_configs.size() != reqs.size().
GenerationOutput generate(VisionLanguageModel& m, const std::vector<VlmRequest>& reqs,
                          const std::vector<GenerationConfig>& row_configs, PrefillHook* hook,
                          bool record_logits, const TokenCallback& on_token = {});

/// Samples one token per row. @param logits [B, V] fp32 @return [B] int64 (greedy when temperature == 0).
at::Tensor sample_next(const at::Tensor& logits, const GenerationConfig& gc, at::Generator& gen);

}  // namespace vispco
