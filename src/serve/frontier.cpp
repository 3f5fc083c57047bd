// Loading an optimize report's evaluated plans and picking the cheapest one that meets a target (frontier.h).
#include "serve/frontier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"

namespace vispco::serve {
namespace {

using nlohmann::json;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

json FrontierPlan::promise_json() const {
  json j = {{"plan", plan}, {"flops_ratio", flops_ratio}, {"accuracy_loss", loss}};
  if (loss_upper) {
    j["accuracy_loss_bound"] = *loss_upper;
    j["confidence"] = confidence;
  }
  return j;
}

std::string Target::text() const {
  std::string s;
  if (max_accuracy_loss) s = "max_accuracy_loss " + num(*max_accuracy_loss);
  if (max_flops_ratio)
    s += (s.empty() ? "" : " and ") + std::string("max_flops_ratio ") + num(*max_flops_ratio);
  return s;
}

json Target::to_json() const {
  json j = json::object();
  if (max_accuracy_loss) j["max_accuracy_loss"] = *max_accuracy_loss;
  if (max_flops_ratio) j["max_flops_ratio"] = *max_flops_ratio;
  return j;
}

void Target::validate() const {
  if (max_accuracy_loss && !(*max_accuracy_loss >= 0 && *max_accuracy_loss <= 1))
    throw InvalidArgument("max_accuracy_loss must be in [0, 1] (an accuracy fraction), got " +
                          num(*max_accuracy_loss));
  if (max_flops_ratio && !(*max_flops_ratio > 0 && *max_flops_ratio <= 1))
    throw InvalidArgument("max_flops_ratio must be in (0, 1], got " + num(*max_flops_ratio));
}

Frontier Frontier::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--frontier " + path + ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw ConfigError("--frontier " + path + ": not JSON (" + e.what() +
                      "); give the optimize.json `vispco " + "optimize` wrote");
  }
  return from_json(j, path);
}

Frontier Frontier::from_json(const json& report, const std::string& source) {
  const auto bad = [&](const std::string& what) {
    return ConfigError("--frontier " + source + ": " + what +
                       " (expected the optimize.json `vispco optimize` writes, docs/optimize.md)");
  };
  if (!report.is_object() || !report.contains("calibration") || !report["calibration"].is_object() ||
      !report["calibration"].contains("points") || !report["calibration"]["points"].is_array())
    throw bad("no calibration.points array");
  const auto& points = report["calibration"]["points"];
  Frontier f;
  f.source_ = source;
  if (report.contains("inputs") && report["inputs"].is_object()) {
    const auto& in = report["inputs"];
    if (in.contains("model_hash") && in["model_hash"].is_string()) f.model_hash_ = in["model_hash"];
    if (in.contains("model") && in["model"].is_string()) f.model_ = in["model"];
  }
  std::optional<double> reference;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const std::string at = "calibration.points[" + std::to_string(i) + "]";
    if (!p.is_object() || !p.contains("plan") || !p["plan"].is_string() || !p.contains("accuracy") ||
        !p["accuracy"].is_number() || !p.contains("flops_ratio") || !p["flops_ratio"].is_number())
      throw bad(at + " lacks a plan string, a numeric accuracy or a numeric flops_ratio");
    FrontierPlan fp;
    fp.plan = p["plan"];
    fp.accuracy = p["accuracy"];
    fp.flops_ratio = p["flops_ratio"];
    if (!(fp.accuracy >= 0 && fp.accuracy <= 1) || !(fp.flops_ratio > 0 && fp.flops_ratio <= 1 + 1e-9))
      throw bad(at + " (" + fp.plan + "): accuracy must be in [0, 1] and flops_ratio in (0, 1], got " +
                num(fp.accuracy) + " and " + num(fp.flops_ratio));
    if (p.contains("loss_bound") && p["loss_bound"].is_object()) {
      const auto& b = p["loss_bound"];
      if (!b.contains("upper") || !b["upper"].is_number() || !b.contains("confidence") ||
          !b["confidence"].is_number())
        throw bad(at + " (" + fp.plan + "): loss_bound lacks a numeric upper or confidence");
      fp.loss_upper = b["upper"].get<double>();
      fp.confidence = b["confidence"];
    }
    if (fp.plan == "none" && !reference) reference = fp.accuracy;
    f.plans_.push_back(std::move(fp));
  }
  if (!reference) throw bad("no unpruned point (plan \"none\") to measure the losses against");
  f.reference_accuracy_ = *reference;
  for (auto& p : f.plans_) p.loss = p.plan == "none" ? 0.0 : *reference - p.accuracy;
  std::stable_sort(f.plans_.begin(), f.plans_.end(), [](const FrontierPlan& a, const FrontierPlan& b) {
    return a.flops_ratio != b.flops_ratio ? a.flops_ratio < b.flops_ratio : a.judged_loss() < b.judged_loss();
  });
  return f;
}

void Frontier::check_model(const std::string& model_hash, const std::string& model_dir) const {
  if (!model_hash_.empty() && model_hash_ != model_hash)
    throw ConfigError("--frontier " + source_ + " was written for another model (" +
                      (model_.empty() ? std::string("?") : model_) + ", " + model_hash_ + "); this server " +
                      "serves " + model_dir + " (" + model_hash + ")");
}

const FrontierPlan* Frontier::pick(const Target& t) const {
  const FrontierPlan* best = nullptr;
  for (const auto& p : plans_) {  // cheapest first
    if ((t.max_accuracy_loss && p.judged_loss() > *t.max_accuracy_loss + 1e-12) ||
        (t.max_flops_ratio && p.flops_ratio > *t.max_flops_ratio + 1e-12))
      continue;
    if (t.max_accuracy_loss) return &p;  // a loss target: the cheapest that meets it
    if (best == nullptr || p.judged_loss() < best->judged_loss()) best = &p;  // a FLOPs cap: most accurate
  }
  return best;
}

const FrontierPlan& Frontier::closest(const Target& t) const {
  if (!t.max_accuracy_loss) return plans_.front();  // the cheapest
  std::vector<const FrontierPlan*> within;
  for (const auto& p : plans_)
    if (!t.max_flops_ratio || p.flops_ratio <= *t.max_flops_ratio + 1e-12) within.push_back(&p);
  if (within.empty())
    for (const auto& p : plans_) within.push_back(&p);
  return **std::min_element(within.begin(), within.end(), [](const FrontierPlan* a, const FrontierPlan* b) {
    return a->judged_loss() < b->judged_loss();  // first (cheapest) among equals
  });
}

const FrontierPlan* Frontier::find(const std::string& plan) const {
  for (const auto& p : plans_)
    if (p.plan == plan) return &p;
  return nullptr;
}

}  // namespace vispco::serve
