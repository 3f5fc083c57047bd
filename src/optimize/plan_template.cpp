// Plan templates with one free parameter; see plan_template.h.
#include "optimize/plan_template.h"

#include <cstdio>
#include <sstream>

#include "core/errors.h"
#include "eval/prefill_sweep.h"
#include "model/n_visual_varies.h"
#include "prune/scorer.h"

namespace vispco::optimize {
namespace {

bool is_pdrop_ratio_template(const std::string& t) {
  return t.rfind("pdrop:", 0) == 0 && t.find("ratio=") == std::string::npos &&
         t.find('+') == std::string::npos;
}

std::string ratio_text(int64_t p) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(p) / 1000.0);
  return buf;
}

// p‰ as a percentage with one decimal, exactly: 253 → "25.3", 1000 → "100.0".
std::string percent_text(int64_t p) { return std::to_string(p / 10) + "." + std::to_string(p % 10); }

// Every "{P}" of `text` replaced by `with`.
std::string replace_p(std::string text, const std::string& with) {
  for (size_t at = text.find("{P}"); at != std::string::npos; at = text.find("{P}", at + with.size()))
    text.replace(at, 3, with);
  return text;
}

// @throws InvalidArgument unless every "{P}" is followed by '%' and "{K}" is absent.
void check_ratio_template(const std::string& text) {
  if (text.find("{K}") != std::string::npos)
    throw InvalidArgument("plan template '" + text + "' has both {K} and {P}; vary one (a count or a ratio)");
  for (size_t at = text.find("{P}"); at != std::string::npos; at = text.find("{P}", at + 3))
    if (at + 3 >= text.size() || text[at + 3] != '%')
      throw InvalidArgument("plan template '" + text + "': {P} is a keep ratio, write keep={P}%");
}

}  // namespace

KeepAs parse_keep_as(const std::string& text) {
  if (text == "auto") return KeepAs::kAuto;
  if (text == "ratio") return KeepAs::kRatio;
  if (text == "count") return KeepAs::kCount;
  throw InvalidArgument("--keep-as must be auto, ratio or count, got '" + text + "'");
}

bool keep_as_ratio(KeepAs keep_as, const ModelShape& shape) {
  return keep_as == KeepAs::kRatio || (keep_as == KeepAs::kAuto && n_visual_varies(shape));
}

bool is_keep_ratio_template(const std::string& text) { return text.find("{P}") != std::string::npos; }

std::string apply_keep_as(const std::string& text, KeepAs keep_as, const ModelShape& shape) {
  if (!keep_as_ratio(keep_as, shape) || is_pdrop_ratio_template(text) || text.rfind("pdrop:", 0) == 0 ||
      text.find("{K}") != std::string::npos || is_keep_ratio_template(text) ||
      text.find("keep=") != std::string::npos || text.find('+') != std::string::npos || text.empty() ||
      text == "none")
    return text;
  return text + (text.find(':') == std::string::npos ? ":keep={P}%" : ",keep={P}%");
}

PlanTemplate PlanTemplate::parse(const std::string& text, const ModelShape& shape) {
  PlanTemplate t;
  t.text_ = text;
  t.shape_ = shape;
  if (text.empty() || text == "none") throw InvalidArgument("plan template is empty (e.g. fastv:layer=2)");
  if (is_pdrop_ratio_template(text)) {
    t.param_ = TemplateParam::kPdropRatio;
    t.param_max_ = 1000;
  } else if (is_keep_ratio_template(text)) {
    check_ratio_template(text);
    t.param_ = TemplateParam::kKeepPercent;
    t.param_max_ = 1000;
  } else {
    t.param_ = TemplateParam::kKeep;
    t.param_max_ = shape.n_visual_tokens;
  }
  const PruningPlan top = t.at(t.param_max_);
  try {
    top.validate(shape);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("plan template '" + text + "': " + e.what());
  }
  if (top.empty()) throw InvalidArgument("plan template '" + text + "' has no stage");
  t.pre_llm_ = true;
  for (const auto& s : top.stages) t.pre_llm_ = t.pre_llm_ && s.layer == 0;
  return t;
}

PruningPlan PlanTemplate::at(int64_t p) const {
  if (p < param_min() || p > param_max_)
    throw InvalidArgument("plan template '" + text_ + "': parameter " + std::to_string(p) + " is outside [" +
                          std::to_string(param_min()) + ", " + std::to_string(param_max_) + "]");
  if (param_ == TemplateParam::kPdropRatio) {
    try {
      return parse_plan(text_ + ",ratio=" + ratio_text(p), shape_);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("plan template '" + text_ + "': " + e.what());
    }
  }
  if (param_ == TemplateParam::kKeepPercent) {
    try {
      return parse_plan(replace_p(text_, percent_text(p)), shape_);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("plan template '" + text_ + "' at keep " + param_text(p) + ": " + e.what());
    }
  }
  return eval::sweep_plan(text_, p, shape_.n_visual_tokens);
}

bool PlanTemplate::valid_at(int64_t p, std::string* why) const {
  try {
    at(p).validate(shape_);
    return true;
  } catch (const InvalidArgument& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
}

std::string PlanTemplate::param_text(int64_t p) const {
  switch (param_) {
    case TemplateParam::kPdropRatio:
      return ratio_text(p);
    case TemplateParam::kKeepPercent:
      return percent_text(p) + "%";
    case TemplateParam::kKeep:
      break;
  }
  return std::to_string(p);
}

std::string PlanTemplate::param_name() const {
  switch (param_) {
    case TemplateParam::kPdropRatio:
      return "λ";
    case TemplateParam::kKeepPercent:
      return "keep ratio";
    case TemplateParam::kKeep:
      break;
  }
  return "K";
}

std::vector<std::string> split_templates(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ';')) {
    const auto b = piece.find_first_not_of(" \t"), e = piece.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(piece.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace vispco::optimize
