// Reading, writing and validating training recipes.
#include "train/recipe.h"

#include <algorithm>
#include <fstream>

#include "core/errors.h"
#include "core/json_file.h"
#include "eval/synthvqa/families.h"

namespace vispco::train {

namespace {

nlohmann::json stage_json(const StageSettings& s) {
  nlohmann::json j = {{"steps", s.steps}, {"batch", s.batch}, {"lr", s.lr}, {"warmup", s.warmup},
                      {"weight_decay", s.weight_decay}, {"clip", s.clip}};
  if (s.pool != 1) j["pool"] = s.pool;
  if (s.foreground_keep != 0) j["foreground_keep"] = s.foreground_keep;
  if (s.text_loss) j["text_loss"] = true;
  if (s.grounding != 0) j["grounding"] = s.grounding;
  if (s.answer_grounding != 0) j["answer_grounding"] = s.answer_grounding;
  if (s.count_centres) j["count_centres"] = true;
  if (s.text_glyphs) j["text_glyphs"] = true;
  if (s.readout != 0) j["readout"] = s.readout;
  if (s.position_loss != 0) j["position_loss"] = s.position_loss;
  if (s.count_heads) j["count_heads"] = true;
  if (s.glyph_index_head) j["glyph_index_head"] = true;
  if (s.min_texts != 0) j["min_texts"] = s.min_texts;
  if (s.count_footprints) j["count_footprints"] = true;
  if (s.answer_row_at_first_glyph) j["answer_row_at_first_glyph"] = true;
  if (!s.turn_weights.empty()) j["turn_weights"] = s.turn_weights;
  if (s.sincos_positions != 0) j["sincos_positions"] = s.sincos_positions;
  if (s.mimetic_tower) j["mimetic_tower"] = true;
  if (s.glyph_weight != 1) j["glyph_weight"] = s.glyph_weight;
  return j;
}

StageSettings stage_from(const nlohmann::json& j, const std::string& where) {
  StageSettings s;
  for (const auto& [k, v] : j.items()) {
    if (k == "steps") s.steps = v.get<int64_t>();
    else if (k == "batch") s.batch = v.get<int64_t>();
    else if (k == "lr") s.lr = v.get<double>();
    else if (k == "warmup") s.warmup = v.get<double>();
    else if (k == "weight_decay") s.weight_decay = v.get<double>();
    else if (k == "clip") s.clip = v.get<double>();
    else if (k == "pool") s.pool = v.get<int64_t>();
    else if (k == "foreground_keep") s.foreground_keep = v.get<int64_t>();
    else if (k == "text_loss") s.text_loss = v.get<bool>();
    else if (k == "grounding") s.grounding = v.get<double>();
    else if (k == "answer_grounding") s.answer_grounding = v.get<double>();
    else if (k == "count_centres") s.count_centres = v.get<bool>();
    else if (k == "text_glyphs") s.text_glyphs = v.get<bool>();
    else if (k == "readout") s.readout = v.get<double>();
    else if (k == "position_loss") s.position_loss = v.get<double>();
    else if (k == "count_heads")
      s.count_heads = v.get<bool>();
    else if (k == "glyph_index_head")
      s.glyph_index_head = v.get<bool>();
    else if (k == "min_texts")
      s.min_texts = v.get<int64_t>();
    else if (k == "count_footprints")
      s.count_footprints = v.get<bool>();
    else if (k == "answer_row_at_first_glyph")
      s.answer_row_at_first_glyph = v.get<bool>();
    else if (k == "turn_weights")
      s.turn_weights = v.get<std::map<std::string, int64_t>>();
    else if (k == "sincos_positions")
      s.sincos_positions = v.get<double>();
    else if (k == "mimetic_tower")
      s.mimetic_tower = v.get<bool>();
    else if (k == "glyph_weight")
      s.glyph_weight = v.get<double>();
    else throw InvalidArgument("recipe: unknown key '" + where + "." + k + "'");
  }
  return s;
}

void check_stage(const StageSettings& s, const std::string& w) {
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

}  // namespace

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

int64_t TrainRecipe::decoder_steps() const {
  int64_t n = 0;
  for (const auto* st : decoder_stages()) n += st->steps;
  return n;
}

void TrainRecipe::validate() const {
  model.validate();
  check_stage(vision, "vision");
  check_stage(decoder, "decoder");
  if (vision.pool != 1 || decoder.pool != 1) throw InvalidArgument("recipe: vision.pool and decoder.pool must be 1");
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
    check_stage(refine[i], w);
    if (refine[i].pool != 1 || refine[i].foreground_keep != 0)
      throw InvalidArgument("recipe: " + w + " trains at full resolution: pool must be 1 and foreground_keep 0");
  }
  if (trains_readout() && model.text.num_hidden_layers < 6)
    throw InvalidArgument("recipe: readout reads the hidden state after decoder layer 4, so it needs ≥ 6 decoder layers, got " +
                          std::to_string(model.text.num_hidden_layers));
  bool decoder_position = false;
  for (const auto* st : decoder_stages()) decoder_position = decoder_position || st->position_loss != 0;
  if (decoder_position) throw InvalidArgument("recipe: position_loss is for the vision stage only");
  for (size_t i = 0; i < lowres.size(); ++i) {
    const auto w = "lowres[" + std::to_string(i) + "]";
    check_stage(lowres[i], w);
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
    throw InvalidArgument("recipe: answer_grounding grounds decoder layer 3, so it needs ≥ 5 decoder layers, got " +
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
  auto lowres_json = nlohmann::json::array();
  for (const auto& st : r.lowres) lowres_json.push_back(stage_json(st));
  auto gates = nlohmann::json::array();
  for (const auto& g : r.probe_gates) gates.push_back({{"decoder_step", g.decoder_step}, {"min_accuracy", g.min_accuracy}});
  nlohmann::json j = {{"model", llava_config_to_json(r.model)}, {"tokenizer_vocab", r.tokenizer_vocab},
          {"tokenizer_images", r.tokenizer_images}, {"seed", r.seed},
          {"data_seed", r.data_seed}, {"vision", stage_json(r.vision)}, {"lowres", lowres_json},
          {"decoder", stage_json(r.decoder)},
          {"turns", r.turns}, {"checkpoint_seconds", r.checkpoint_seconds}, {"mimetic_init", r.mimetic_init},
          {"probe_every", r.probe_every}, {"probe_per_family", r.probe_per_family}, {"probe_gates", gates}};
  if (r.tokenizer_split_glyphs) j["tokenizer_split_glyphs"] = true;
  if (!r.refine.empty()) {
    auto refine_json = nlohmann::json::array();
    for (const auto& st : r.refine) refine_json.push_back(stage_json(st));
    j["refine"] = refine_json;
  }
  return j;
}

TrainRecipe recipe_from_json(const nlohmann::json& j) {
  TrainRecipe r;
  try {
    for (const auto& [k, v] : j.items()) {
      if (k == "model") r.model = llava_config_from_json(v);
      else if (k == "tokenizer_vocab") r.tokenizer_vocab = v.get<int64_t>();
      else if (k == "tokenizer_images") r.tokenizer_images = v.get<int64_t>();
      else if (k == "tokenizer_split_glyphs") r.tokenizer_split_glyphs = v.get<bool>();
      else if (k == "seed") r.seed = v.get<uint64_t>();
      else if (k == "data_seed") r.data_seed = v.get<uint64_t>();
      else if (k == "vision") r.vision = stage_from(v, "vision");
      else if (k == "lowres") {
        if (!v.is_array()) throw InvalidArgument("recipe: lowres must be a list of stages");
        for (size_t i = 0; i < v.size(); ++i) r.lowres.push_back(stage_from(v[i], "lowres[" + std::to_string(i) + "]"));
      }
      else if (k == "decoder") r.decoder = stage_from(v, "decoder");
      else if (k == "refine") {
        if (!v.is_array()) throw InvalidArgument("recipe: refine must be a list of stages");
        for (size_t i = 0; i < v.size(); ++i) r.refine.push_back(stage_from(v[i], "refine[" + std::to_string(i) + "]"));
      }
      else if (k == "turns") r.turns = v.get<int64_t>();
      else if (k == "checkpoint_seconds") r.checkpoint_seconds = v.get<int64_t>();
      else if (k == "mimetic_init") r.mimetic_init = v.get<bool>();
      else if (k == "probe_every") r.probe_every = v.get<int64_t>();
      else if (k == "probe_per_family") r.probe_per_family = v.get<int64_t>();
      else if (k == "probe_gates") {
        if (!v.is_array()) throw InvalidArgument("recipe: probe_gates must be a list of {decoder_step, min_accuracy}");
        for (const auto& g : v) {
          for (const auto& [gk, gv] : g.items())
            if (gk != "decoder_step" && gk != "min_accuracy")
              throw InvalidArgument("recipe: unknown key 'probe_gates[]." + gk + "'");
          r.probe_gates.push_back({g.at("decoder_step").get<int64_t>(), g.at("min_accuracy").get<double>()});
        }
      }
      else if (k == "comment") continue;
      else throw InvalidArgument("recipe: unknown key '" + k + "'");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("recipe: a field has the wrong type: ") + e.what());
  }
  r.validate();
  return r;
}

TrainRecipe load_recipe(const std::string& path) {
  return recipe_from_json(read_json_file(path, "recipe"));
}

}  // namespace vispco::train
