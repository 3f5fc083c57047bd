// keep=auto plan parsing and predictor loading (see auto_keep.h).
#include "prune/auto_keep/auto_keep.h"

#include <filesystem>

#include "core/errors.h"
#include "prune/auto_keep/k_features.h"

namespace vispco {

namespace {

const std::string kAuto = "keep=auto";

}  // namespace

bool is_auto_keep(const std::string& plan_text) { return plan_text.find(kAuto) != std::string::npos; }

// p ‰ as a percentage with one decimal, exactly: 253 → "25.3", 1000 → "100.0".
std::string permille_percent(int64_t p) { return std::to_string(p / 10) + "." + std::to_string(p % 10); }

PruningPlan AutoKeepPlan::at(int64_t keep, const ModelShape& shape) const {
  const bool has_colon = template_text.find(':') != std::string::npos;
  const std::string value = permille ? permille_percent(keep) + "%" : std::to_string(keep);
  auto plan = parse_plan(template_text + (has_colon ? "," : ":") + "keep=" + value, shape);
  plan.validate(shape);
  return plan;
}

bool AutoKeepPlan::full(int64_t keep, const ModelShape& shape) const {
  return keep >= (permille ? 1000 : shape.n_visual_tokens);
}

std::string AutoKeepPlan::keep_text(int64_t keep) const {
  return permille ? "keep " + permille_percent(keep) + "%" : "K=" + std::to_string(keep);
}

std::string auto_keep_text(const std::string& template_text) {
  const bool has_colon = template_text.find(':') != std::string::npos;
  return template_text + (has_colon ? "," : ":") + kAuto;
}

std::string AutoKeepPlan::to_string() const {
  return auto_keep_text(template_text) + (predictor_file.empty() ? "" : ":file=" + predictor_file);
}

AutoKeepPlan parse_auto_keep(const std::string& text, const ModelShape& shape) {
  if (text.find('+') != std::string::npos)
    throw InvalidArgument("plan '" + text + "': keep=auto works on one-stage plans only");
  const auto pos = text.find(kAuto);
  if (pos == std::string::npos) throw InvalidArgument("plan '" + text + "' has no keep=auto");
  // The keep=auto piece runs to the next ',' (its value may carry ":file=PATH").
  auto end = text.find(',', pos);
  const std::string piece = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  AutoKeepPlan out;
  const std::string value = piece.substr(kAuto.size());
  if (!value.empty()) {
    if (value.rfind(":file=", 0) != 0 || value.size() == 6)
      throw InvalidArgument("plan '" + text + "': write keep=auto or keep=auto:file=PATH");
    out.predictor_file = value.substr(6);
  }
  std::string rest = text.substr(0, pos) + (end == std::string::npos ? "" : text.substr(end + 1));
  while (!rest.empty() && (rest.back() == ',' || rest.back() == ':')) rest.pop_back();
  if (rest.find("keep=") != std::string::npos)
    throw InvalidArgument("plan '" + text + "': keep=auto and keep=K together");
  if (rest.empty() || rest.front() == ':' || rest.front() == ',')
    throw InvalidArgument("plan '" + text + "' has no scorer name");
  out.template_text = rest;
  // Canonical template: the stage's own printing, without its keep.
  const auto stage = out.at(shape.n_visual_tokens, shape).stages.at(0);
  out.template_text = stage.scorer + ":layer=" + std::to_string(stage.layer);
  for (const auto& [k, v] : stage.options) out.template_text += "," + k + "=" + v;
  return out;
}

std::string default_k_predictor_path(const std::string& model_dir) {
  return (std::filesystem::path(model_dir) / "k_predictor.safetensors").string();
}

KPredictor load_plan_predictor(AutoKeepPlan& plan, const std::string& model_dir, const ModelShape& shape) {
  const std::string path =
      plan.predictor_file.empty() ? default_k_predictor_path(model_dir) : plan.predictor_file;
  auto p = load_k_predictor(path);
  const auto& m = p->meta;
  if (m.template_text != plan.template_text)
    throw ConfigError("K predictor '" + path + "' was trained for " + m.template_text + ", not " +
                      plan.template_text +
                      " (train one with `vispco optimize --method dynamic-k --template " +
                      plan.template_text + "`, or name it with keep=auto:file=PATH)");
  plan.permille = m.ladder_unit == "permille";
  if (plan.permille && (m.ladder.back() != 1000 || m.ladder.front() < 1))
    throw ConfigError("K predictor '" + path +
                      "': its keep-ratio ladder must run from ≥ 1 ‰ to 1000 ‰, got " +
                      std::to_string(m.ladder.front()) + "–" + std::to_string(m.ladder.back()) + " ‰");
  if (!plan.permille && (m.ladder.back() != shape.n_visual_tokens || m.ladder.front() < 1))
    throw ConfigError("K predictor '" + path + "': its ladder ends at " + std::to_string(m.ladder.back()) +
                      " but this model has N_v = " + std::to_string(shape.n_visual_tokens));
  if (m.n_features != k_feature_width(shape) || m.features != kKFeatureRecipe)
    throw ConfigError("K predictor '" + path + "' reads " + std::to_string(m.n_features) + " features (" +
                      m.features + "), this model gives " + std::to_string(k_feature_width(shape)) + " (" +
                      kKFeatureRecipe + "): trained for another model?");
  for (auto k : m.ladder) plan.at(k, shape);  // every rung must be a valid plan here
  return p;
}

}  // namespace vispco
