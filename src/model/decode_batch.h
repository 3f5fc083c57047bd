// A decode batch that rows can join while it runs (continuous batching, as in Orca, Yu et al., OSDI 2022,
// §3 "iteration-level scheduling", and vLLM): each add() prefills a group of requests on its own (with its
// pruning plan) and merges the group's KV cache into the running one; each step() samples one token for every
// row and feeds the rows that go on through one batched decoder step. A row leaves when it finishes.
// generate() is one add() followed by step() until the batch is empty.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/logprobs.h"

namespace vispco {

/// A row that has finished (EOS, max_new_tokens, or its token callback ended it).
struct FinishedRow {
  int64_t id = 0;                           ///< the caller's id given to add()
  std::vector<int64_t> tokens;              ///< generated ids (EOS excluded)
  std::string finish_reason;                ///< "stop" | "length" (OpenAI's words)
  std::vector<at::Tensor> step_logits;      ///< when recorded: one [1, V] fp32 CPU tensor per sampled step
  std::vector<StepLogprobs> step_logprobs;  ///< with top_logprobs ≥ 0: one per generated token
  /// Non-empty when sampling this row failed (finish_reason "error"); the other rows go on.
  std::string error;
};

/// Called for each token a row generates (EOS excluded) as soon as it is sampled; returning false ends the
/// row after this token (finish reason "stop").
using RowTokenCallback = std::function<bool(int64_t id, int64_t token)>;

/// `r` carrying image b of `vis` (a batch from encode_image_list(…, want_cls_attention)) as its own tower
/// output: the row cut to its N_v, with its layout (VisualTokens::row), so that generate() and DecodeBatch
/// skip the tower for it (VlmRequest::visual).
VlmRequest with_visual_row(const VlmRequest& r, const VisualTokens& vis, int64_t b, const ModelShape& shape);

/// The decoder's KV cache of one prompt's prefix up to and including its image, after the plan's pruning
/// (DecodeBatch::prefill_image_prefix): what a later question on the same image, under the same plan and the
/// same text before the image, continues from (serve/image_cache.h). Immutable once made, and shared: a
/// one-row add_after_prefixes() (and a join into an empty batch) takes the prefix's KV tensors themselves
/// (KvCache copies share tensors), then appends the text after the image and the decode steps to them. That
/// is safe only because each layer's buffer holds exactly its length (exact_buffers()): LayerKvCache::append
/// then has no spare capacity to write into and moves the copy to a new buffer, leaving the prefix's
/// tensors untouched. prefill_image_prefixes() makes prefixes so (copying a buffer with spare capacity) and
/// add_after_prefixes() and ImageCache::insert refuse others.
struct ImagePrefix {
  KvCache cache;         ///< one row (B = 1); layers ≥ a stage's ℓ hold the kept visual tokens only
  at::Tensor next_pos;   ///< [1, 1] or [A, 1, 1] int64: RoPE position of the first token after the image
  int64_t n_prefix = 0;  ///< prompt ids before the image placeholder
  int64_t n_visual = 0, n_visual_kept = 0;  ///< the image's N_v, and its visual tokens after the last stage
  std::vector<int64_t> tokens_per_layer;    ///< prefix tokens entering each decoder layer
  double vision_ms = 0;                     ///< vision tower + projector when it was made
  double prefill_ms = 0;                    ///< decoder prefill of the prefix when it was made
  /// Bytes held: the KV buffers, their validity masks and next_pos.
  int64_t bytes() const;
  /// Whether every layer's buffers hold exactly its cached length (no spare capacity an append would write
  /// into in place; see above).
  bool exact_buffers() const;
};

/// The running decode batch of one model. Not thread-safe: one thread drives it.
class DecodeBatch {
 public:
  explicit DecodeBatch(VisionLanguageModel& m);

  /// Prefills `reqs` as one batch (left padding, `hook` pruning inside the prefill, as generate()) and adds
  /// their rows to the batch with their pending first-token logits. Images of different layouts (N_v, grid)
  /// are prefilled in groups of one layout, each with its own hook->begin(), and join together. The group's
  /// KV cache joins the running one layer by layer; the shorter side is left-padded with masked positions
  /// (RoPE positions stay per row, so a row's keys, values and next positions do not change). Nothing changes
  /// when it throws.
  /// @param ids one caller id per request (reported back by step()) @param record_logits per request: keep
  /// its logits of every step @param top_logprobs per request (or empty = none): −1, or keep for each
  /// generated token only its log-probability and the top n ∈ [0, 20] (FinishedRow::step_logprobs) @return
  /// the group's prefill measurements (vision_ms, prepass_ms, prefill_ms, n_visual, n_visual_kept,
  /// n_text_max, tokens_per_layer, batch)
  /// @throws InvalidArgument for an empty group, sizes that differ, a bad config, a prompt without its image
  /// placeholder.
  GenerationStats add(const std::vector<VlmRequest>& reqs, const std::vector<GenerationConfig>& configs,
                      const std::vector<int64_t>& ids, PrefillHook* hook,
                      const std::vector<bool>& record_logits, const std::vector<int64_t>& top_logprobs = {});

  /// The first half of a split prefill: the prompt of `req` up to and including its image (the placeholder
  /// expanded to N_v visual tokens) through the decoder with `hook` pruning, into a fresh one-row cache; the
  /// batch itself is unchanged. The tower runs unless req.visual carries its output. Only for hooks whose
  /// decisions read nothing after the image (pre-LLM, question-independent plans: prune/bound_plan.h
  /// BoundPlan::question_independent); a hook that wants the gradient pre-pass is refused.
  /// prefill_image_prefixes({req}, hook)[0]. @throws InvalidArgument for a prompt without exactly one
  /// placeholder, or such a hook.
  ImagePrefix prefill_image_prefix(const VlmRequest& req, PrefillHook* hook);

  /// prefill_image_prefix() for several requests at once, as add() prefills: one vision-tower pass over all
  /// their images, then one decoder prefill (left padding) per group of one layout (N_v, grid), each with
  /// its own hook->begin(); each row's cache is then cut out (its padding dropped) into its own one-row
  /// prefix with exact buffers. Each prefix's vision_ms / prefill_ms are those of the pass that made it
  /// (shared by the rows of that pass). A row's KV may differ from a one-row prefill's by float rounding
  /// (another batch shape); a prefix is reused as stored, so a later hit continues from exactly the KV the
  /// request that made it continued from. @return one prefix per request, in order.
  /// @throws InvalidArgument for no requests, a prompt without exactly one placeholder, or a hook that wants
  /// the gradient pre-pass.
  std::vector<ImagePrefix> prefill_image_prefixes(const std::vector<VlmRequest>& reqs, PrefillHook* hook);

  /// The second half: each request's prompt ids after its image placeholder, prefilled as one group on top of
  /// its prefix (prefixes[i] for reqs[i], e.g. an image-cache hit; the prefixes are read, not changed) — the
  /// prefixes' caches are joined with left padding, the text after the image is left-padded to the longest
  /// and takes positions from each prefix's next_pos — then the rows join the batch as add() joins them.
  /// reqs[i].pixels and .visual are not read. @param configs, ids, record_logits, top_logprobs as add()
  /// @return stats of this half: prefill_ms, n_text_max (the longest prompt's ids − 1), row_n_visual /
  /// row_n_visual_kept from the prefixes, tokens_per_layer = the largest row's prefix + text after it.
  /// Nothing changes when it throws. @throws InvalidArgument as add(), for a prefix count ≠ reqs.size(), a
  /// prompt with no text after its image, or a prefix without exact buffers (ImagePrefix::exact_buffers).
  GenerationStats add_after_prefixes(const std::vector<const ImagePrefix*>& prefixes,
                                     const std::vector<VlmRequest>& reqs,
                                     const std::vector<GenerationConfig>& configs,
                                     const std::vector<int64_t>& ids, const std::vector<bool>& record_logits,
                                     const std::vector<int64_t>& top_logprobs = {});

  /// Samples one token for every row from its pending logits (greedy or its own seeded sampler), calls
  /// `on_token`, then runs one decoder step [B', 1] over the rows that go on. @return the rows that finished,
  /// in batch order. No-op on an empty batch.
  std::vector<FinishedRow> step(const RowTokenCallback& on_token = {});

  /// The first half of step(): sampling and bookkeeping only; finished rows leave. Must be followed by
  /// advance() before the next sample() or add(). Lets a caller time the first token. @throws Error when a
  /// sampled step has not been advanced yet.
  std::vector<FinishedRow> sample(const RowTokenCallback& on_token = {});
  /// The second half: feeds the tokens sample() chose through the decoder ([B', 1], KV cache grows by one).
  void advance();

  /// Rows in the batch.
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  bool empty() const { return rows_.empty(); }
  /// Caller ids of the rows, in batch order.
  std::vector<int64_t> ids() const;
  /// Bytes held by the KV-cache buffers now.
  int64_t kv_cache_bytes() const { return cache_.bytes(); }
  /// Tokens generated so far over every row (incl. finished ones).
  int64_t n_generated() const { return n_generated_; }

 private:
  struct Row {
    int64_t id = 0;
    GenerationConfig gc;
    at::Generator gen;
    bool record = false;
    int64_t top_n = -1;  // ≥ 0: keep StepLogprobs per generated token
    std::vector<int64_t> tokens;
    std::vector<at::Tensor> logits;
    std::vector<StepLogprobs> logprobs;
  };
  // One group of one layout, prefilled into its own cache (add() joins the groups).
  struct Prefilled {
    KvCache cache;
    at::Tensor logits;    // [B_g, V] fp32 first-token logits
    at::Tensor next_pos;  // [B_g, 1] or [A, B_g, 1]
    GenerationStats stats;
  };
  Prefilled prefill_group(const std::vector<VlmRequest>& reqs, const VisualTokens& vis,
                          const VisualLayout& layout, PrefillHook* hook);
  // Checks add()'s per-request arguments. @throws InvalidArgument.
  void check_rows(size_t n, const std::vector<GenerationConfig>& configs, const std::vector<int64_t>& ids,
                  const std::vector<bool>& record_logits, const std::vector<int64_t>& top_logprobs) const;
  // Joins prefilled parts (rows of request indices `order`) into the batch: copies first, then commits with
  // moves that cannot throw.
  void join(std::vector<Prefilled>& parts, const std::vector<int64_t>& order,
            const std::vector<GenerationConfig>& configs, const std::vector<int64_t>& ids,
            const std::vector<bool>& record_logits, const std::vector<int64_t>& top_logprobs);

  VisionLanguageModel& m_;
  std::vector<Row> rows_;
  KvCache cache_;
  at::Tensor pending_logits_;     // [B', V] fp32, the next-token logits of each row (before sample())
  at::Tensor next_pos_;           // [B', 1] (or [A, B', 1]) int64, RoPE position of each row's next token
  std::vector<int64_t> to_feed_;  // after sample(): the token each row feeds in advance()
  int64_t n_generated_ = 0;
};

}  // namespace vispco
