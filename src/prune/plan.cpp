// Parsing, printing and validation of pruning plans.
#include "prune/plan.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "core/json_file.h"
#include "prune/scorer.h"

namespace vispco {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument("plan: " + what + " must be an integer (got '" + text + "')");
}

// "25%" → 25. @throws InvalidArgument unless a number in (0, 100] before the '%'.
double parse_percent(const std::string& text) {
  const std::string number = text.substr(0, text.size() - 1);
  try {
    size_t used = 0;
    const double v = std::stod(number, &used);
    if (used == number.size() && v > 0 && v <= 100) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument("plan: keep=" + text + " must be a count or a share in (0%, 100%]");
}

// keep= as written: the count, or the share ("12.5%", 15 significant digits so that it parses back equal).
std::string keep_text(const PruneStage& s) {
  if (s.keep_percent <= 0) return std::to_string(s.keep);
  std::ostringstream out;
  out << std::setprecision(15) << s.keep_percent << '%';
  return out.str();
}

// A stage as written: which of layer= and keep= it names.
struct ParsedStage {
  PruneStage stage;
  bool has_layer = false, has_keep = false;
};

// PyramidDrop (Xing et al., CVPR 2025 §3.2) as stages: "pdrop:[layers=ℓ1/ℓ2/…][,ratio=λ |
// ,keep=K][,scorer=fastv]" → one stage per layer, K_i = round(N_v · λ^i). Layers default to the paper's L/4,
// L/2, 3L/4 (8/16/24 of LLaMA's 32); keep=K sets λ so that the last stage keeps K; without either λ = 0.5
// (the paper's).
std::vector<PruneStage> expand_pdrop(const ParsedStage& p, int64_t n_visual, int64_t n_layers) {
  std::vector<int64_t> layers;
  double ratio = 0.5;
  bool has_ratio = false;
  std::string scorer = "fastv";
  if (p.has_layer) throw InvalidArgument("plan: pdrop takes layers=ℓ1/ℓ2/…, not layer=");
  for (const auto& [k, v] : p.stage.options) {
    if (k == "layers") {
      for (const auto& l : split(v, '/')) layers.push_back(parse_int(l, "pdrop layer"));
    } else if (k == "ratio") {
      try {
        ratio = std::stod(v);
      } catch (const std::exception&) {
        throw InvalidArgument("plan: pdrop ratio must be a number (got '" + v + "')");
      }
      has_ratio = true;
    } else if (k == "scorer") {
      scorer = v;
    } else {
      throw InvalidArgument("plan: unknown pdrop option '" + k + "' (valid: layers, ratio, keep, scorer)");
    }
  }
  if (layers.empty()) {
    if (n_layers < 4)
      throw InvalidArgument(
          "plan: pdrop needs layers=ℓ1/ℓ2/… (its default L/4, L/2, 3L/4 needs a model of ≥ 4 layers)");
    layers = {n_layers / 4, n_layers / 2, 3 * n_layers / 4};
  }
  if (p.has_keep) {
    if (has_ratio) throw InvalidArgument("plan: pdrop takes ratio= or keep=, not both");
    if (p.stage.keep < 1 || p.stage.keep > n_visual)
      throw InvalidArgument("plan: pdrop keep " + std::to_string(p.stage.keep) +
                            " is outside [1, N_v = " + std::to_string(n_visual) + "]");
    ratio = std::pow(double(p.stage.keep) / double(n_visual), 1.0 / double(layers.size()));
  }
  if (!(ratio > 0 && ratio <= 1)) throw InvalidArgument("plan: pdrop ratio must be in (0, 1]");
  std::vector<PruneStage> out;
  double keep = static_cast<double>(n_visual);
  for (auto l : layers) {
    keep *= ratio;
    out.push_back({l, std::max<int64_t>(1, std::llround(keep)), scorer, {}});
  }
  if (p.has_keep) out.back().keep = p.stage.keep;  // exact, whatever the rounding of λ^n
  return out;
}

ParsedStage parse_stage(const std::string& text) {
  const auto colon = text.find(':');
  ParsedStage p;
  PruneStage& st = p.stage;
  st.scorer = text.substr(0, colon);
  if (st.scorer.empty()) throw InvalidArgument("plan: stage '" + text + "' has no scorer name");
  if (colon != std::string::npos) {
    for (const auto& kv : split(text.substr(colon + 1), ',')) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw InvalidArgument("plan: '" + kv + "' in stage '" + text + "' is not key=value");
      const auto key = kv.substr(0, eq), value = kv.substr(eq + 1);
      if (key == "layer") {
        st.layer = parse_int(value, "layer");
        p.has_layer = true;
      } else if (key == "keep") {
        if (!value.empty() && value.back() == '%')
          st.keep_percent = parse_percent(value);
        else
          st.keep = parse_int(value, "keep");
        p.has_keep = true;
      } else {
        st.options[key] = value;
      }
    }
  }
  if (st.scorer == "pdrop") return p;
  if (!p.has_keep) throw InvalidArgument("plan: stage '" + text + "' needs keep=K");
  if (!p.has_layer) st.layer = default_layer(st.scorer);
  return p;
}

}  // namespace

int64_t resolve_keep(const PruneStage& stage, int64_t n_visual) {
  if (stage.keep_percent <= 0) return stage.keep;
  // In integers of 10⁻⁶ %, so that a share written in decimals rounds as written: 1.4 % of 250 is 3.5 → 4,
  // where doubles give 1.4 / 100 · 250 = 3.4999999999999996 → 3.
  const int64_t micro = std::llround(stage.keep_percent * 1e6);  // ≤ 10⁸
  return std::max<int64_t>(1, (micro * n_visual + 50'000'000) / 100'000'000);
}

std::string PruningPlan::to_string() const {
  if (stages.empty()) return "none";
  std::string out;
  for (const auto& s : stages) {
    if (!out.empty()) out += "+";
    out += s.scorer + ":layer=" + std::to_string(s.layer) + ",keep=" + keep_text(s);
    for (const auto& [k, v] : s.options) out += "," + k + "=" + v;
  }
  return out;
}

void PruningPlan::validate(const ModelShape& shape) const {
  const int64_t n_layers = shape.n_layers, n_v = shape.n_visual_tokens;
  int64_t prev_layer = -1, prev_keep = n_v;
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& s = stages[i];
    const std::string where = "plan stage " + std::to_string(i + 1) + " (" + s.scorer + ")";
    if (s.layer < 0 || s.layer >= n_layers)
      throw InvalidArgument(where + ": layer " + std::to_string(s.layer) + " is outside [0, " +
                            std::to_string(n_layers) + ") for this " + std::to_string(n_layers) +
                            "-layer model");
    if (s.layer <= prev_layer)
      throw InvalidArgument(where + ": layer " + std::to_string(s.layer) +
                            " must come after the previous stage's " + std::to_string(prev_layer));
    if (s.keep_percent < 0 || s.keep_percent > 100 || std::isnan(s.keep_percent))
      throw InvalidArgument(where + ": keep " + keep_text(s) + " is outside (0%, 100%]");
    if (s.keep < 1 || s.keep > n_v)
      throw InvalidArgument(where + ": keep " + std::to_string(s.keep) +
                            " is outside [1, N_v = " + std::to_string(n_v) + "]");
    if (s.keep > prev_keep)
      throw InvalidArgument(where + ": keep " + std::to_string(s.keep) + " exceeds the previous stage's " +
                            std::to_string(prev_keep) + " (K must not increase)");
    make_scorer(s.scorer)->check(s, shape);
    prev_layer = s.layer;
    prev_keep = s.keep;
  }
}

PruningPlan parse_plan(const std::string& text, const ModelShape& shape) {
  return parse_plan(text, shape.n_visual_tokens, shape.n_layers);
}

PruningPlan parse_plan(const std::string& text, int64_t n_visual, int64_t n_layers) {
  PruningPlan plan;
  if (text.empty() || text == "none") return plan;
  if (text.size() > 5 && text.compare(text.size() - 5, 5, ".json") == 0) {
    return plan_from_json(read_json_file(text, "plan file"));
  }
  for (const auto& piece : split(text, '+')) {
    if (piece.empty()) throw InvalidArgument("plan: empty stage in '" + text + "'");
    auto p = parse_stage(piece);
    if (p.stage.keep_percent > 0) p.stage.keep = resolve_keep(p.stage, n_visual);  // the nominal count
    if (p.stage.scorer == "pdrop") {
      for (auto& s : expand_pdrop(p, n_visual, n_layers)) plan.stages.push_back(s);
    } else {
      plan.stages.push_back(p.stage);
    }
  }
  return plan;
}

nlohmann::json to_json(const PruningPlan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : plan.stages) {
    nlohmann::json st = {{"scorer", s.scorer}, {"layer", s.layer}, {"keep", s.keep}, {"options", s.options}};
    if (s.keep_percent > 0) st["keep_percent"] = s.keep_percent;
    stages.push_back(st);
  }
  return {{"stages", stages}};
}

PruningPlan plan_from_json(const nlohmann::json& j) {
  PruningPlan plan;
  if (!j.is_object() || !j.contains("stages") || !j["stages"].is_array())
    throw InvalidArgument("plan JSON must be an object with a \"stages\" array");
  for (const auto& s : j["stages"]) {
    try {
      PruneStage st;
      st.scorer = s.at("scorer").get<std::string>();
      st.layer = s.at("layer").get<int64_t>();
      st.keep = s.at("keep").get<int64_t>();
      st.keep_percent = s.value("keep_percent", 0.0);
      if (s.contains("options"))
        for (const auto& [k, v] : s["options"].items())
          st.options[k] = v.is_string() ? v.get<std::string>() : v.dump();
      plan.stages.push_back(st);
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument("plan JSON stage " + s.dump() + ": " + e.what());
    }
  }
  return plan;
}

}  // namespace vispco
