// Reading, writing and validating training recipes.
#include "train/recipe.h"

#include <algorithm>
#include <fstream>

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"
#include "eval/synthvqa/families.h"

namespace vispco::train {

namespace {

// The keys of one training stage; the first six are always written, the rest only when set.
const JsonFields<StageSettings>& stage_fields() {
  using S = StageSettings;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<S> fields("recipe", {
      {"steps", &S::steps}, {"batch", &S::batch}, {"lr", &S::lr}, {"warmup", &S::warmup},
      {"weight_decay", &S::weight_decay}, {"clip", &S::clip}, omitted_at_default("pool", &S::pool),
      omitted_at_default("foreground_keep", &S::foreground_keep),
      omitted_at_default("text_loss", &S::text_loss), omitted_at_default("grounding", &S::grounding),
      omitted_at_default("answer_grounding", &S::answer_grounding),
      omitted_at_default("count_centres", &S::count_centres),
      omitted_at_default("text_glyphs", &S::text_glyphs), omitted_at_default("readout", &S::readout),
      omitted_at_default("glyph_readout", &S::glyph_readout), omitted_at_default("glyph_head", &S::glyph_head),
      omitted_at_default("glyph_value", &S::glyph_value),
      omitted_at_default("position_loss", &S::position_loss),
      omitted_at_default("count_heads", &S::count_heads),
      omitted_at_default("glyph_index_head", &S::glyph_index_head),
      omitted_at_default("min_texts", &S::min_texts),
      omitted_at_default("count_footprints", &S::count_footprints),
      omitted_at_default("answer_row_at_first_glyph", &S::answer_row_at_first_glyph),
      omitted_at_default("turn_weights", &S::turn_weights),
      omitted_at_default("sincos_positions", &S::sincos_positions),
      omitted_at_default("mimetic_tower", &S::mimetic_tower),
      omitted_at_default("glyph_weight", &S::glyph_weight)});
  // clang-format on
  return fields;
}

// A list of stages ("lowres", "refine"); errors name the stage as "<key>[i].<field>".
std::function<std::vector<StageSettings>(const nlohmann::json&)> stage_list_from(const std::string& key) {
  return [key](const nlohmann::json& v) {
    if (!v.is_array()) throw InvalidArgument("recipe: " + key + " must be a list of stages");
    std::vector<StageSettings> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(stage_fields().read(v[i], key + "[" + std::to_string(i) + "]."));
    return out;
  };
}

nlohmann::json stage_list_json(const std::vector<StageSettings>& stages) {
  auto out = nlohmann::json::array();
  for (const auto& st : stages) out.push_back(stage_fields().write(st));
  return out;
}

// Probe gates: both keys required.
std::vector<ProbeGate> probe_gates_from(const nlohmann::json& v) {
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<ProbeGate> fields("recipe", {
      {"decoder_step", &ProbeGate::decoder_step}, {"min_accuracy", &ProbeGate::min_accuracy}});
  // clang-format on
  if (!v.is_array())
    throw InvalidArgument("recipe: probe_gates must be a list of {decoder_step, min_accuracy}");
  std::vector<ProbeGate> out;
  for (const auto& g : v) {
    if (!g.is_object() || !g.contains("decoder_step") || !g.contains("min_accuracy"))
      throw InvalidArgument("recipe: every probe gate needs decoder_step and min_accuracy (got " + g.dump() +
                            ")");
    out.push_back(fields.read(g, "probe_gates[]."));
  }
  return out;
}

nlohmann::json probe_gates_json(const std::vector<ProbeGate>& gates) {
  auto out = nlohmann::json::array();
  for (const auto& g : gates)
    out.push_back({{"decoder_step", g.decoder_step}, {"min_accuracy", g.min_accuracy}});
  return out;
}

// The recipe's top-level keys; "refine" and "tokenizer_split_glyphs" are written only when set.
const JsonFields<TrainRecipe>& recipe_fields() {
  using R = TrainRecipe;
  auto stage_from = [](const std::string& key) {
    return [key](const nlohmann::json& v) { return stage_fields().read(v, key + "."); };
  };
  auto stage_json = [](const StageSettings& s) { return stage_fields().write(s); };
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<R> fields("recipe", {
      converted("model", &R::model, llava_config_from_json, llava_config_to_json),
      {"tokenizer_vocab", &R::tokenizer_vocab}, {"tokenizer_images", &R::tokenizer_images},
      omitted_at_default("tokenizer_split_glyphs", &R::tokenizer_split_glyphs), {"seed", &R::seed},
      {"data_seed", &R::data_seed}, converted("vision", &R::vision, stage_from("vision"), stage_json),
      converted("lowres", &R::lowres, stage_list_from("lowres"), stage_list_json),
      converted("decoder", &R::decoder, stage_from("decoder"), stage_json),
      converted("refine", &R::refine, stage_list_from("refine"), stage_list_json), {"turns", &R::turns},
      {"checkpoint_seconds", &R::checkpoint_seconds}, {"mimetic_init", &R::mimetic_init},
      {"probe_every", &R::probe_every}, {"probe_per_family", &R::probe_per_family},
      converted("probe_gates", &R::probe_gates, probe_gates_from, probe_gates_json), ignored<R>("comment")});
  // clang-format on
  return fields;
}

}  // namespace

void validate_stage(const StageSettings& s, const std::string& w) {
  if (s.steps < 0) throw InvalidArgument("recipe: " + w + ".steps must be ≥ 0");
  if (s.batch < 1) throw InvalidArgument("recipe: " + w + ".batch must be ≥ 1");
  if (!(s.lr > 0)) throw InvalidArgument("recipe: " + w + ".lr must be > 0");
  if (!(s.warmup >= 0 && s.warmup < 1)) throw InvalidArgument("recipe: " + w + ".warmup must be in [0, 1)");
  if (!(s.weight_decay >= 0)) throw InvalidArgument("recipe: " + w + ".weight_decay must be ≥ 0");
  if (!(s.clip > 0)) throw InvalidArgument("recipe: " + w + ".clip must be > 0");
  if (s.pool < 1) throw InvalidArgument("recipe: " + w + ".pool must be ≥ 1");
  if (!(s.grounding >= 0)) throw InvalidArgument("recipe: " + w + ".grounding must be ≥ 0");
  if (!(s.answer_grounding >= 0)) throw InvalidArgument("recipe: " + w + ".answer_grounding must be ≥ 0");
  if (!(s.position_loss >= 0)) throw InvalidArgument("recipe: " + w + ".position_loss must be ≥ 0");
  if (!(s.readout >= 0)) throw InvalidArgument("recipe: " + w + ".readout must be ≥ 0");
  if (!(s.glyph_readout >= 0)) throw InvalidArgument("recipe: " + w + ".glyph_readout must be ≥ 0");
  if (s.glyph_head != 0 && !s.text_glyphs)
    throw InvalidArgument("recipe: " + w +
                          ".glyph_head is the head that reads text glyphs: it needs text_glyphs");
  if (!(s.glyph_value >= 0)) throw InvalidArgument("recipe: " + w + ".glyph_value must be ≥ 0");
  if (s.glyph_value > 0 && !s.text_glyphs)
    throw InvalidArgument("recipe: " + w + ".glyph_value reads text glyphs' value: it needs text_glyphs");
  if (s.glyph_readout > 0 && !s.text_glyphs)
    throw InvalidArgument("recipe: " + w +
                          ".glyph_readout reads the per-glyph answer rows: it needs text_glyphs");
  for (const auto& [family, k] : s.turn_weights) {
    const auto& fams = eval::synthvqa::family_table();
    if (std::none_of(fams.begin(), fams.end(), [&](const auto& f) { return family == f.name; }))
      throw InvalidArgument("recipe: " + w + ".turn_weights: unknown family '" + family + "'");
    if (k < 1) throw InvalidArgument("recipe: " + w + ".turn_weights." + family + " must be ≥ 1");
  }
  if ((s.count_centres || s.count_footprints || s.text_glyphs || s.readout > 0 ||
       s.answer_row_at_first_glyph) &&
      s.answer_grounding == 0)
    throw InvalidArgument(
        "recipe: " + w +
        ".count_centres, count_footprints, text_glyphs, readout and answer_row_at_first_glyph need "
        "answer_grounding > 0");
}

std::vector<const StageSettings*> TrainRecipe::decoder_stages() const {
  std::vector<const StageSettings*> out;
  for (const auto& st : lowres) out.push_back(&st);
  out.push_back(&decoder);
  for (const auto& st : refine) out.push_back(&st);
  return out;
}

bool TrainRecipe::trains_readout() const {
  for (const auto* st : decoder_stages())
    if (st->readout > 0) return true;
  return false;
}

bool TrainRecipe::trains_glyph_value() const {
  for (const auto* st : decoder_stages())
    if (st->glyph_value > 0) return true;
  return false;
}

int64_t TrainRecipe::decoder_steps() const {
  int64_t n = 0;
  for (const auto* st : decoder_stages()) n += st->steps;
  return n;
}

void TrainRecipe::validate() const {
  model.validate();
  validate_stage(vision, "vision");
  validate_stage(decoder, "decoder");
  if (vision.pool != 1 || decoder.pool != 1)
    throw InvalidArgument("recipe: vision.pool and decoder.pool must be 1");
  if (vision.text_loss || vision.grounding != 0 || vision.answer_grounding != 0)
    throw InvalidArgument("recipe: text_loss and grounding are for decoder stages only");
  if (vision.foreground_keep != 0 || decoder.foreground_keep != 0)
    throw InvalidArgument("recipe: foreground_keep is for lowres stages only");
  if (vision.readout != 0) throw InvalidArgument("recipe: readout is for decoder stages only");
  if (!vision.turn_weights.empty()) throw InvalidArgument("recipe: turn_weights is for decoder stages only");
  for (const auto* st : decoder_stages())
    if (st->count_heads || st->glyph_index_head || st->min_texts != 0)
      throw InvalidArgument(
          "recipe: count_heads, glyph_index_head and min_texts are for the vision stage only");
  for (const auto* st : decoder_stages())
    if (st->sincos_positions != 0 || st->mimetic_tower || st->glyph_weight != 1)
      throw InvalidArgument(
          "recipe: sincos_positions, mimetic_tower and glyph_weight are for the vision stage only");
  if (!(vision.glyph_weight > 0)) throw InvalidArgument("recipe: vision.glyph_weight must be > 0");
  if (!(vision.sincos_positions >= 0)) throw InvalidArgument("recipe: vision.sincos_positions must be ≥ 0");
  if (vision.min_texts < 0 || vision.min_texts > 5)
    throw InvalidArgument("recipe: vision.min_texts must be in [0, 5]");
  for (size_t i = 0; i < refine.size(); ++i) {
    const auto w = "refine[" + std::to_string(i) + "]";
    validate_stage(refine[i], w);
    if (refine[i].pool != 1 || refine[i].foreground_keep != 0)
      throw InvalidArgument("recipe: " + w +
                            " trains at full resolution: pool must be 1 and foreground_keep 0");
  }
  for (const auto* st : decoder_stages())
    if (st->glyph_head < 0 || st->glyph_head >= model.text.num_attention_heads)
      throw InvalidArgument("recipe: glyph_head must be in [0, " +
                            std::to_string(model.text.num_attention_heads) + "), got " +
                            std::to_string(st->glyph_head));
  bool glyph_readout = false;
  for (const auto* st : decoder_stages()) glyph_readout = glyph_readout || st->glyph_readout > 0;
  if ((trains_readout() || glyph_readout) && model.text.num_hidden_layers < 6)
    throw InvalidArgument(
        "recipe: readout and glyph_readout read the hidden state after decoder layer 4, so they need ≥ 6 "
        "decoder layers, got " +
        std::to_string(model.text.num_hidden_layers));
  bool decoder_position = false;
  for (const auto* st : decoder_stages()) decoder_position = decoder_position || st->position_loss != 0;
  if (decoder_position) throw InvalidArgument("recipe: position_loss is for the vision stage only");
  for (size_t i = 0; i < lowres.size(); ++i) {
    const auto w = "lowres[" + std::to_string(i) + "]";
    validate_stage(lowres[i], w);
    const auto& st = lowres[i];
    if (st.foreground_keep < 0 || st.foreground_keep > model.n_visual_tokens() ||
        (st.foreground_keep > 0 && st.pool != 1))
      throw InvalidArgument("recipe: " + w + ".foreground_keep must be in [0, N_v] and needs pool 1");
    if (model.vision.grid() % lowres[i].pool != 0)
      throw InvalidArgument("recipe: " + w + ".pool must divide the patch grid side " +
                            std::to_string(model.vision.grid()));
  }
  bool answer_grounding = false;
  for (const auto* st : decoder_stages()) answer_grounding = answer_grounding || st->answer_grounding > 0;
  if (answer_grounding && model.text.num_hidden_layers < 5)
    throw InvalidArgument(
        "recipe: answer_grounding grounds decoder layer 3, so it needs ≥ 5 decoder layers, got " +
        std::to_string(model.text.num_hidden_layers));
  if (turns < 1) throw InvalidArgument("recipe: turns must be ≥ 1");
  if (probe_every < 0) throw InvalidArgument("recipe: probe_every must be ≥ 0 (0 = off)");
  if (probe_per_family < 1) throw InvalidArgument("recipe: probe_per_family must be ≥ 1");
  if (!probe_gates.empty() && probe_every == 0)
    throw InvalidArgument("recipe: probe_gates need probe_every > 0");
  for (const auto& g : probe_gates)
    if (g.decoder_step < 1 || !(g.min_accuracy >= 0 && g.min_accuracy <= 1))
      throw InvalidArgument("recipe: each probe gate needs decoder_step ≥ 1 and min_accuracy in [0, 1]");
  if (checkpoint_seconds < 1) throw InvalidArgument("recipe: checkpoint_seconds must be ≥ 1");
  if (tokenizer_images < 1) throw InvalidArgument("recipe: tokenizer_images must be ≥ 1");
  if (tokenizer_vocab < 260) throw InvalidArgument("recipe: tokenizer_vocab must be ≥ 260 (byte fallback)");
  if (model.image_token_index < tokenizer_vocab)
    throw InvalidArgument("recipe: model.image_token_index " + std::to_string(model.image_token_index) +
                          " must be ≥ tokenizer_vocab " + std::to_string(tokenizer_vocab));
}

nlohmann::json to_json(const TrainRecipe& r) {
  auto j = recipe_fields().write(r);
  if (r.refine.empty()) j.erase("refine");
  return j;
}

TrainRecipe recipe_from_json(const nlohmann::json& j) { return recipe_fields().read_valid(j); }

StageSettings stage_settings_from_json(const nlohmann::json& j, const std::string& where) {
  return stage_fields().read(j, where + ".");
}

nlohmann::json to_json(const StageSettings& s) { return stage_fields().write(s); }

TrainRecipe load_recipe(const std::string& path) { return recipe_from_json(read_json_file(path, "recipe")); }

}  // namespace vispco::train
