// Plan templates with one free parameter; see plan_template.h.
#include "optimize/plan_template.h"

#include <cstdio>
#include <sstream>

#include "core/errors.h"
#include "eval/prefill_sweep.h"
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

}  // namespace

PlanTemplate PlanTemplate::parse(const std::string& text, const ModelShape& shape) {
  PlanTemplate t;
  t.text_ = text;
  t.shape_ = shape;
  if (text.empty() || text == "none") throw InvalidArgument("plan template is empty (e.g. fastv:layer=2)");
  if (is_pdrop_ratio_template(text)) {
    t.param_ = TemplateParam::kPdropRatio;
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
  return param_ == TemplateParam::kPdropRatio ? ratio_text(p) : std::to_string(p);
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
