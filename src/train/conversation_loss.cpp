// The stage-2 loss as a composition of the teacher-forced batch and the losses of train/losses/ (see
// conversation_loss.h).
#include "train/conversation_loss.h"

#include <ATen/ATen.h>

#include <memory>

#include "core/errors.h"
#include "model/kv_cache.h"
#include "train/losses/answer_grounding_loss.h"
#include "train/losses/glyph_readout_loss.h"
#include "train/losses/glyph_value_loss.h"
#include "train/losses/readout_loss.h"
#include "train/losses/token_loss.h"
#include "train/losses/word_grounding_loss.h"

namespace vispco::train {

namespace {

// The decoder layers whose attention rows the grounding losses read.
std::set<int64_t> recorded_layers(const ConversationOptions& opts) {
  std::set<int64_t> layers;
  if (opts.grounding > 0) layers.insert(opts.grounding_layers.begin(), opts.grounding_layers.end());
  if (opts.answer_grounding > 0)
    layers.insert(opts.answer_grounding_layers.begin(), opts.answer_grounding_layers.end());
  return layers;
}

// @throws InvalidArgument naming the first option that does not fit (conversation_loss.h).
void validate(const ConversationOptions& opts, const LlavaConfig& cfg, const at::Tensor& images,
              const std::vector<Conversation>& turns) {
  const bool ground = opts.grounding > 0, ground_answer = opts.answer_grounding > 0;
  if (ground && opts.turn_patches.size() != turns.size())
    throw InvalidArgument("conversation_loss: grounding needs turn_patches for every conversation");
  if (ground_answer && opts.turn_answers.size() != turns.size())
    throw InvalidArgument("conversation_loss: answer grounding needs turn_answers for every conversation");
  const bool readout = opts.readout > 0;
  if (readout && (!ground_answer || !opts.readout_head || opts.answer_grounding_layers.empty()))
    throw InvalidArgument(
        "conversation_loss: the readout needs answer_grounding > 0 (with its layers) and a readout_head");
  const bool glyph_readout = opts.glyph_readout > 0;
  if (glyph_readout && (!ground_answer || opts.answer_grounding_layers.empty()))
    throw InvalidArgument(
        "conversation_loss: the glyph readout needs answer_grounding > 0 (with its layers)");
  if ((readout || glyph_readout) &&
      (opts.readout_layer < 0 || opts.readout_layer >= cfg.text.num_hidden_layers - 1))
    throw InvalidArgument("conversation_loss: readout_layer must be in [0, L − 1)");
  if (opts.glyph_head < 0 || opts.glyph_head >= cfg.text.num_attention_heads)
    throw InvalidArgument("conversation_loss: glyph_head must be in [0, H)");
  const bool glyph_value = opts.glyph_value > 0;
  if (glyph_value && (!ground_answer || opts.answer_grounding_layers.empty() || !opts.glyph_value_head))
    throw InvalidArgument(
        "conversation_loss: the glyph value loss needs answer_grounding > 0 (with its layers) and a "
        "glyph_value_head");
  if (glyph_value && (!opts.patch_glyphs.defined() || opts.patch_glyphs.dim() != 2 ||
                      opts.patch_glyphs.size(0) != images.size(0) ||
                      opts.patch_glyphs.size(1) != cfg.vision.grid() * cfg.vision.grid()))
    throw InvalidArgument("conversation_loss: the glyph value loss needs patch_glyphs [B, N_grid]");
  for (int64_t b = 0; b < images.size(0); ++b) {
    if (ground && opts.turn_patches[b].size() != turns[b].size())
      throw InvalidArgument("conversation_loss: turn_patches must have one entry per turn");
    if (ground_answer && opts.turn_answers[b].size() != turns[b].size())
      throw InvalidArgument("conversation_loss: turn_answers must have one entry per turn");
  }
  if (opts.prune_hook != nullptr &&
      (!recorded_layers(opts).empty() || opts.pool != 1 || opts.visual_keep.defined()))
    throw InvalidArgument(
        "conversation_loss: a prune hook excludes pooling, visual_keep, grounding and readout");
}

// Prune-then-fine-tune: the token loss over the tokens `hook` leaves, each keeping its original target.
ConversationLoss pruned_conversation_loss(VisionLanguageModel& m, TeacherForcedBatch& batch,
                                          PrefillHook& hook) {
  auto& lm = m.language_model();
  KvCache cache(m.config().text.num_hidden_layers);
  const PositionTargets targets(batch.state, batch.target);
  auto h = lm->forward(batch.state, cache, &hook);  // state → the surviving tokens
  ConversationLoss out;
  const at::Tensor kept_target = targets.at(batch.state);  // [B, T']
  out.token = token_loss(lm->logits(h), kept_target);      // logits [B, T', V] fp32
  out.n_targets = kept_target.ne(-100).sum().item<int64_t>();
  out.total = out.token;
  out.grounding = out.answer = out.readout = out.glyph = out.glyph_value = at::zeros({}, out.token.options());
  return out;
}

}  // namespace

at::Tensor conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                             const std::vector<Conversation>& turns, int64_t pool,
                             const at::Tensor& visual_keep) {
  ConversationOptions opts;
  opts.pool = pool;
  opts.visual_keep = visual_keep;
  return conversation_loss(m, images, turns, opts).total;
}

ConversationLoss conversation_loss(VisionLanguageModel& m, const at::Tensor& images,
                                   const std::vector<Conversation>& turns, const ConversationOptions& opts) {
  const auto& cfg = m.config();
  const auto visual = decoder_visual_tokens(m, images, opts.pool, opts.visual_keep);  // [B, N_v', D]
  validate(opts, cfg, images, turns);
  const bool ground = opts.grounding > 0, ground_answer = opts.answer_grounding > 0;
  const bool readout = opts.readout > 0, glyph_readout = opts.glyph_readout > 0,
             glyph_value = opts.glyph_value > 0;
  auto batch = build_teacher_forced_batch(m, visual, turns,
                                          {.text_loss = opts.text_loss,
                                           .object_words = ground,
                                           .answer_row_at_first_glyph = opts.answer_row_at_first_glyph,
                                           .turn_answers = ground_answer ? &opts.turn_answers : nullptr,
                                           .pool = opts.pool,
                                           .visual_keep = opts.visual_keep});
  if (opts.prune_hook != nullptr) return pruned_conversation_loss(m, batch, *opts.prune_hook);

  // One recorder serves every auxiliary loss: the attention rows of the grounded layers at the query rows
  // (object words, then answer rows, then glyph rows), the hidden state after readout_layer at those rows,
  // and the input of the first answer-grounded layer. Each loss builds its targets over the same rows.
  const auto layers = recorded_layers(opts);
  std::unique_ptr<AttentionRowRecorder> rec;
  at::Tensor word_target, answer_target, readout_y, glyph_y;
  GlyphValueTargets glyph_values;
  if (!layers.empty()) {
    const auto rows = query_rows(batch, ground, ground_answer);
    if (ground) word_target = word_grounding_target(batch, rows, opts.turn_patches);
    if (ground_answer)
      answer_target = answer_grounding_target(batch, rows, opts.turn_answers, cfg.text.num_attention_heads,
                                              opts.glyph_head);
    if (readout) readout_y = readout_target(batch, rows, opts.turn_answers);
    if (glyph_readout) glyph_y = glyph_readout_target(batch, rows);
    if (glyph_value) glyph_values = glyph_value_targets(batch, opts.patch_glyphs);
    rec = std::make_unique<AttentionRowRecorder>(layers, rows.rows.to(batch.state.hidden.device()));
    if (readout || glyph_readout) rec->record_hidden_after(opts.readout_layer);
    if (glyph_value) rec->record_input_of(*opts.answer_grounding_layers.begin());
  }
  KvCache cache(cfg.text.num_hidden_layers);
  auto& lm = m.language_model();
  const auto logits = lm->logits(lm->forward(batch.state, cache, rec.get()));  // [B, T, V] fp32
  const auto dev = logits.device();
  ConversationLoss out;
  out.token = token_loss(logits, batch.target);
  out.n_targets = batch.target.ne(-100).sum().item<int64_t>();
  const auto zero = [&] { return at::zeros({}, out.token.options()); };
  std::vector<at::Tensor> word_probs, answer_probs;  // the recorded layers in order; each loss takes its own
  if (rec) {
    size_t k = 0;
    for (int64_t l : layers) {
      const auto& pr = rec->recorded().at(k++);
      if (ground && opts.grounding_layers.count(l)) word_probs.push_back(pr);
      if (ground_answer && opts.answer_grounding_layers.count(l)) answer_probs.push_back(pr);
    }
  }
  out.grounding = ground ? grounding_loss(word_probs, word_target.to(dev)) : zero();
  out.answer = ground_answer ? attention_target_loss(answer_probs, answer_target.to(dev)) : zero();
  out.readout = readout ? readout_loss(opts.readout_head, rec->hidden(), readout_y.to(dev)) : zero();
  out.glyph = glyph_readout ? glyph_readout_loss(*lm, rec->hidden(), glyph_y.to(dev)) : zero();
  if (glyph_value && !glyph_values.empty()) {  // the grounded layer's value of glyph_head's key/value group
    auto& layer = *lm->model->layers[*opts.answer_grounding_layers.begin()]->as<LlamaDecoderLayerImpl>();
    const int64_t group = opts.glyph_head / (cfg.text.num_attention_heads / cfg.text.num_key_value_heads);
    out.glyph_value = glyph_value_loss(layer, rec->layer_input(), glyph_values, group, cfg.text.d_head(),
                                       opts.glyph_value_head);
  } else {
    out.glyph_value = zero();
  }
  // The weighted sum, in this order (the order fixes the float sum of the recipes' published runs).
  out.total = out.token;
  if (readout) out.total = out.total + opts.readout * out.readout;
  if (glyph_value) out.total = out.total + opts.glyph_value * out.glyph_value;
  if (glyph_readout) out.total = out.total + opts.glyph_readout * out.glyph;
  if (ground) out.total = out.total + opts.grounding * out.grounding;
  if (ground_answer) out.total = out.total + opts.answer_grounding * out.answer;
  return out;
}

}  // namespace vispco::train
