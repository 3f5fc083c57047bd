// Reading, writing and validating the HR training recipe.
#include "train/hr/hr_recipe.h"

#include "core/errors.h"
#include "core/json_fields.h"
#include "core/json_file.h"

namespace vispco::train {

namespace {

const JsonFields<HrRecipe>& hr_fields() {
  using R = HrRecipe;
  auto stage_from = [](const std::string& key) {
    return [key](const nlohmann::json& v) { return stage_settings_from_json(v, key); };
  };
  auto stage_json = [](const StageSettings& s) { return to_json(s); };
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<R> fields("HR recipe", {
      converted("tower", &R::tower, stage_from("tower"), stage_json),
      converted("decoder", &R::decoder, stage_from("decoder"), stage_json), {"turns", &R::turns},
      {"seed", &R::seed}, {"data_seed", &R::data_seed}, {"checkpoint_seconds", &R::checkpoint_seconds},
      {"probe_every", &R::probe_every}, {"probe_per_family", &R::probe_per_family}, ignored<R>("comment")});
  // clang-format on
  return fields;
}

// Only the optimiser fields (and glyph_weight for the tower, answer_grounding for the decoder) mean
// something.
void check_plain(const StageSettings& s, const std::string& where, bool tower) {
  validate_stage(s, where);
  StageSettings rest = s;
  const StageSettings d;
  rest.steps = d.steps;
  rest.batch = d.batch;
  rest.lr = d.lr;
  rest.warmup = d.warmup;
  rest.weight_decay = d.weight_decay;
  rest.clip = d.clip;
  if (tower) rest.glyph_weight = d.glyph_weight;
  if (!tower) rest.answer_grounding = d.answer_grounding;
  if (!(rest == d))
    throw InvalidArgument("HR recipe: " + where + " takes only steps, batch, lr, warmup, weight_decay, clip" +
                          (tower ? " and glyph_weight" : " and answer_grounding"));
}

}  // namespace

void HrRecipe::validate() const {
  check_plain(tower, "tower", true);
  check_plain(decoder, "decoder", false);
  if (!(tower.glyph_weight > 0)) throw InvalidArgument("HR recipe: tower.glyph_weight must be > 0");
  if (turns < 1) throw InvalidArgument("HR recipe: turns must be ≥ 1");
  if (checkpoint_seconds < 1) throw InvalidArgument("HR recipe: checkpoint_seconds must be ≥ 1");
  if (probe_every < 0) throw InvalidArgument("HR recipe: probe_every must be ≥ 0 (0 = off)");
  if (probe_per_family < 1) throw InvalidArgument("HR recipe: probe_per_family must be ≥ 1");
}

nlohmann::json to_json(const HrRecipe& r) { return hr_fields().write(r); }

HrRecipe hr_recipe_from_json(const nlohmann::json& j) { return hr_fields().read_valid(j); }

HrRecipe load_hr_recipe(const std::string& path) {
  return hr_recipe_from_json(read_json_file(path, "HR recipe"));
}

}  // namespace vispco::train
