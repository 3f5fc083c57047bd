// The training recipe of the bundled SynthVQA model (a plain value read from JSON): model dimensions in the
// Hugging Face LLaVA config form, then three stages — (1) vision tower pre-training on dense per-patch
// labels, (2) projector + decoder training on multi-turn SynthVQA conversations with the tower frozen, each
// image carrying several question/answer turns (the 576 visual positions are paid once for many answers).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/llava/config.h"

namespace vispco::train {

/// Optimiser settings of one stage (AdamW, linear warm-up then cosine decay to 10%, global-norm clipping).
struct StageSettings {
  int64_t steps = 100;         ///< optimiser steps, ≥ 0 (0 skips the stage)
  int64_t batch = 8;           ///< images per step, ≥ 1
  double lr = 1e-3;            ///< peak learning rate, > 0
  double warmup = 0.05;        ///< warm-up fraction of steps, [0, 1)
  double weight_decay = 0.01;  ///< AdamW decoupled weight decay, ≥ 0
  double clip = 1.0;           ///< max global gradient norm, > 0
  /// Decoder stages only: the projected visual tokens are average-pooled pool × pool over the patch grid
  /// (576 → 144 for 2); 1 = full resolution. Must divide the grid side; the vision and final stages use 1.
  int64_t pool = 1;
  /// Decoder stages only, 0 = off: train on the `foreground_keep` visual tokens that the stage-1 patch heads
  /// rate most likely to show an object or text (1 − P(nothing) of the colour and ink heads), in their
  /// original order — a curriculum that removes the background the decoder must otherwise learn to ignore.
  /// Needs pool 1.
  int64_t foreground_keep = 0;
  /// Decoder stages only: predict every text token after the image, not only the answers
  /// (ConversationOptions::text_loss; a stated deviation from LLaVA's answer-only loss).
  bool text_loss = false;
  /// Decoder stages only, ≥ 0: weight of the word-level grounding loss (train/grounding.h); 0 = off.
  double grounding = 0;
  /// Decoder stages only, ≥ 0: weight of the answer-position grounding loss (grounding.h AnswerGrounding:
  /// heads 0 and 1 of decoder layer 3 at each answer position attend to the objects the answer is about);
  /// 0 = off.
  double answer_grounding = 0;
  /// Decoder stages with answer_grounding only: count and exist answers attend to each object's centre patch
  /// alone, not its footprint (grounding.h answer_grounding_of's count_centres).
  bool count_centres = false;
  /// Decoder stages with answer_grounding only: text answers get per-glyph targets — `glyph_head` (head 0
  /// unless set) of the grounded layer, at the row predicting each answer token, attends to the glyphs that
  /// token spells (AnswerGroundingOptions::text_glyphs).
  bool text_glyphs = false;
  /// Decoder stages with answer_grounding only, ≥ 0: weight of the answer-row readout loss
  /// (ConversationOptions::readout: a training-only linear head regresses the spatial offset and the count
  /// from the hidden state after decoder layer 4 at each answer row; needs ≥ 6 decoder layers). 0 = off.
  double readout = 0;
  /// Decoder stages with text_glyphs only, ≥ 0: weight of the glyph readout
  /// (ConversationOptions::glyph_readout: at each text answer token's row the hidden state after decoder
  /// layer 4, through the final norm and the LM head, predicts the token that row emits; needs ≥ 6 decoder
  /// layers). 0 = off.
  double glyph_readout = 0;
  /// Decoder stages with text_glyphs only: the head of the grounded layer (3) that reads a text answer's
  /// glyphs (ConversationOptions::glyph_head), in [0, H). 0 = the head that also reads colours, shapes and
  /// counts.
  int64_t glyph_head = 0;
  /// Decoder stages with text_glyphs only, ≥ 0: weight of the glyph value loss
  /// (ConversationOptions::glyph_value: at every visual token showing a glyph, the value glyph_head of the
  /// grounded layer reads there classifies the glyph through a training-only linear head). 0 = off.
  double glyph_value = 0;
  /// Vision stage only, ≥ 0: weight of the patch-position regression (two more patch-head outputs regress
  /// each patch's column and row in [−1, 1], mean squared error) that keeps where a patch is linearly
  /// readable in the tower's features. The decoder needs it for spatial relations: RoPE rotates queries and
  /// keys, so attention can find a token by position but the value it reads carries no position of its own. 0
  /// = off.
  double position_loss = 0;
  /// Vision stage only: two more patch heads classify, on every patch of an object, how many objects of the
  /// scene share its colour and how many share its shape (patch_labels.h patch_extra_labels()). A count
  /// question then reads its answer from the counted objects' visual tokens in one hop, as a colour question
  /// reads a colour; recipe 4 derived counts from how one head's attention divides between the objects and
  /// BOS, and its counts stayed at 56 % with off-by-one errors for n ≥ 3 (docs/bundled-model-training.md,
  /// session 12).
  bool count_heads = false;
  /// Vision stage only: one more patch head classifies the position (1…4) of a text patch's character in its
  /// string, so the decoder's per-glyph attention has the reading order in the keys.
  bool glyph_index_head = false;
  /// Vision stage only, 0…5: each training scene gets strings added until it holds at least this many
  /// (generator.h SampleOptions::min_texts) — text-rich scenes give the glyph heads several times the glyph
  /// patches per step (a SynthVQA scene holds 0–2 strings). 0 = the benchmark's scene distribution.
  int64_t min_texts = 0;
  /// Decoder stages with answer_grounding only: count questions ground head 0 on the counted objects' patches
  /// (footprints, as colour questions), without the BOS sink — for towers with count_heads, whose count is on
  /// every such patch. Exist questions keep count_centres' targets.
  bool count_footprints = false;
  /// Decoder stages with answer_grounding only: answer grounding and readout act at the row that predicts the
  /// answer's first token spelling a character (ConversationOptions::answer_row_at_first_glyph) — for counts
  /// ("3" is "▁" "3") the row that emits the digit, not the one that emits the bare "▁".
  bool answer_row_at_first_glyph = false;
  /// Decoder stages only: family name → k ≥ 1, so that family contributes up to k of each image's extra turns
  /// per cycle over the families (scene_questions.h sample_questions' weights); empty = one each.
  std::map<std::string, int64_t> turn_weights;
  /// Vision stage only, ≥ 0: a fresh run starts the tower's learned position table from 2-D sine-cosine
  /// positions of this scale (train/tower_init.h sincos_position_init); 0 = N(0, 0.02²) like every weight.
  double sincos_positions = 0;
  /// Vision stage only: a fresh run starts the tower's attention from the mimetic initialisation
  /// (train/tower_init.h mimetic_tower_init), so that with sincos_positions it attends locally at step 0.
  bool mimetic_tower = false;
  /// Vision stage only, > 0: weight of the glyph (character) head's loss among the patch heads (1 = as the
  /// others). The glyph head learns last (docs/bundled-model-training.md); a larger weight gives it a larger
  /// share of the shared tower's updates.
  double glyph_weight = 1;
  bool operator==(const StageSettings&) const = default;
};

/// An early stop on the held-out probe: the first probe at or after decoder step `decoder_step` (counted over
/// all decoder stages) must reach overall accuracy ≥ `min_accuracy`; when it does not and the next probe does
/// not either, training stops there (heldout_probe.h check_probe_gates) — a run that will not reach its
/// target is not finished.
struct ProbeGate {
  int64_t decoder_step = 0;  ///< ≥ 1
  double min_accuracy = 0;   ///< in [0, 1]
  bool operator==(const ProbeGate&) const = default;
};

/// The whole recipe.
struct TrainRecipe {
  LlavaConfig model;                ///< dimensions; text vocab_size/image_token_index must fit the tokenizer
  int64_t tokenizer_vocab = 512;    ///< SentencePiece pieces (image_token_index must be ≥ this)
  int64_t tokenizer_images = 1200;  ///< SynthVQA scenes whose questions form the tokenizer corpus, ≥ 1
  /// Text answers enter the tokenizer corpus one character per word, so no piece spans two glyphs.
  bool tokenizer_split_glyphs = false;
  uint64_t seed = 1;          ///< weight init and question sampling
  uint64_t data_seed = 7001;  ///< SynthVQA seed of training images (disjoint from the calib/test seeds)
  StageSettings vision;       ///< stage 1: tower + patch heads
  /// Stages 2a… (optional, run in order before `decoder`): projector + decoder at low visual resolution, each
  /// with its own `pool` > 1 — a resolution curriculum (e.g. pool 4 then 2: 36 then 144 visual tokens) that
  /// lets the decoder learn to read the image on short sequences before the full N_v.
  std::vector<StageSettings> lowres;
  StageSettings decoder;  ///< stage 2b: projector + decoder at full N_v, tower frozen
  /// Stages after `decoder` (optional, run in order; JSON key "refine"): more projector + decoder steps at
  /// full N_v, each with its own optimiser, warm-up and cosine schedule (a warm restart; e.g. a lower-lr
  /// continuation of the final stage). pool 1 and no foreground_keep. Empty in recipes before recipe 6.
  std::vector<StageSettings> refine;
  int64_t turns = 8;                 ///< question/answer turns per image in stage 2, ≥ 1
  int64_t checkpoint_seconds = 120;  ///< write a checkpoint at least this often (wall clock), ≥ 1
  /// Mimetic initialisation of the decoder's attention (train/mimetic_init.h) before the first decoder step.
  bool mimetic_init = false;
  /// Held-out probe of the decoder stages, ≥ 0 (0 = off): every `probe_every` steps and at the end of each
  /// decoder stage, greedy answers through the inference path (all N_v visual tokens) on `probe_per_family`
  /// unseen SynthVQA scenes per family, appended to <out>/probe.jsonl (the learning curves; the loss alone
  /// hid the prior plateau before). The vision stage probes its patch heads at the same interval
  /// (<out>/tower_probe.jsonl).
  int64_t probe_every = 0;
  int64_t probe_per_family = 16;       ///< ≥ 1
  std::vector<ProbeGate> probe_gates;  ///< early stops (need probe_every > 0), checked in order of step

  /// The decoder stages in run order: lowres…, decoder, refine….
  std::vector<const StageSettings*> decoder_stages() const;
  /// True when some decoder stage trains the answer-row readout head (readout > 0).
  bool trains_readout() const;
  /// True when some decoder stage trains the glyph value head (glyph_value > 0).
  bool trains_glyph_value() const;
  /// Optimiser steps of all decoder stages together.
  int64_t decoder_steps() const;
  /// @throws InvalidArgument naming the bad field.
  void validate() const;
  bool operator==(const TrainRecipe&) const = default;
};

/// Checks one stage's common fields (steps ≥ 0, batch ≥ 1, lr > 0, warmup in [0, 1), weight_decay ≥ 0,
/// clip > 0, pool ≥ 1, loss weights ≥ 0, and the switches that need answer_grounding).
/// @param where the stage's name in messages ("vision", "refine[0]"). @throws InvalidArgument naming it.
void validate_stage(const StageSettings& s, const std::string& where);
/// One stage from its JSON object (a recipe's "vision"/"decoder" keys). @param where prefix of error names.
/// @throws InvalidArgument / ConfigError for unknown keys or values of the wrong type.
StageSettings stage_settings_from_json(const nlohmann::json& j, const std::string& where);
/// The stage's JSON object (the first six keys always, the others when not at their default).
nlohmann::json to_json(const StageSettings& s);

nlohmann::json to_json(const TrainRecipe& r);
/// @throws InvalidArgument / ConfigError for unknown keys or bad values.
TrainRecipe recipe_from_json(const nlohmann::json& j);
/// Reads a recipe file. @throws IoError, FormatError, InvalidArgument.
TrainRecipe load_recipe(const std::string& path);

}  // namespace vispco::train
