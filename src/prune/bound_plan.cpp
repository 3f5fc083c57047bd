// The plan front door: parse once, bind once (see bound_plan.h).
#include "prune/bound_plan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "core/errors.h"
#include "prune/auto_keep/k_features.h"
#include "prune/plan_hook.h"
#include "prune/question_independent.h"

namespace vispco {

struct BoundPlan::State {
  ModelShape shape;
  PruningPlan plan;
  std::string text = "none", key = "none";
  std::vector<std::shared_ptr<const Scorer>> scorers;  // one per stage of `plan`
  ScorerEnv env;
  // keep=auto only.
  bool is_auto = false;
  AutoKeepPlan auto_plan;
  mutable KPredictor predictor{nullptr};  // predict() is a module call (not const); it only reads weights
  std::map<int64_t, BoundPlan> rungs;     // K → the bound static plan at K, for every ladder rung
};

namespace {

std::string trimmed(const std::string& text) {
  const auto a = text.find_first_not_of(" \t\n"), z = text.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : text.substr(a, z - a + 1);
}

}  // namespace

bool is_unpruned_text(const std::string& text) {
  std::string t = trimmed(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t.empty() || t == "none";
}

std::string canonical_plan_text(const std::string& text, const ModelShape& shape) {
  if (is_unpruned_text(text)) return "none";
  const std::string t = trimmed(text);
  return is_auto_keep(t) ? parse_auto_keep(t, shape).to_string() : parse_plan(t, shape).to_string();
}

BoundPlan::BoundPlan() : s_(std::make_shared<const State>()) {}

BoundPlan::BoundPlan(std::shared_ptr<const State> state) : s_(std::move(state)) {}

BoundPlan BoundPlan::bind(const PruningPlan& plan, const ModelShape& shape, const ScorerEnv& env) {
  auto s = std::make_shared<State>();
  s->shape = shape;
  s->env = env;
  if (!plan.empty()) {
    s->plan = plan;
    s->scorers = bind_scorers(plan, shape, env);
    s->text = s->key = plan.to_string();
    for (const auto& sc : s->scorers)
      if (auto r = sc->resource_key(); !r.empty()) s->key += " @" + r;
  }
  return BoundPlan(std::move(s));
}

BoundPlan BoundPlan::bind(const std::string& text, const ModelShape& shape, const ScorerEnv& env) {
  if (is_unpruned_text(text)) return bind(PruningPlan{}, shape, env);
  const std::string t = trimmed(text);
  if (!is_auto_keep(t)) return bind(parse_plan(t, shape), shape, env);
  auto s = std::make_shared<State>();
  s->shape = shape;
  s->env = env;
  s->is_auto = true;
  s->auto_plan = parse_auto_keep(t, shape);
  s->predictor = load_plan_predictor(s->auto_plan, env.model_dir, shape);
  s->text = s->key = s->auto_plan.to_string();
  for (const auto k : s->predictor->meta.ladder)  // every rung binds (e.g. a gate file) before any sample
    s->rungs.emplace(
        k, bind(s->auto_plan.full(k, shape) ? PruningPlan{} : s->auto_plan.at(k, shape), shape, env));
  return BoundPlan(std::move(s));
}

bool BoundPlan::unpruned() const { return !s_->is_auto && s_->plan.empty(); }
bool BoundPlan::is_auto() const { return s_->is_auto; }
bool BoundPlan::question_independent() const {
  if (s_->is_auto) return false;
  for (size_t i = 0; i < s_->plan.stages.size(); ++i) {
    const auto& st = s_->plan.stages[i];
    if (st.layer != 0) return false;
    const auto* q = dynamic_cast<const QuestionIndependent*>(s_->scorers.at(i).get());
    if (q == nullptr || !q->question_independent()) return false;
  }
  return true;
}
const PruningPlan& BoundPlan::plan() const { return s_->plan; }
const std::string& BoundPlan::text() const { return s_->text; }
const std::string& BoundPlan::key() const { return s_->key; }
const ModelShape& BoundPlan::shape() const { return s_->shape; }
const ScorerEnv& BoundPlan::env() const { return s_->env; }

std::unique_ptr<PlanHook> BoundPlan::hook(uint64_t seed) const {
  if (s_->is_auto)
    throw InvalidArgument("plan " + s_->text + ": a keep=auto plan has no hook of its own (take at_keep(K))");
  if (s_->plan.empty()) return nullptr;
  return std::make_unique<PlanHook>(s_->plan, s_->shape, seed, s_->scorers);
}

const BoundPlan::State& BoundPlan::auto_state(const char* what) const {
  if (!s_->is_auto) throw InvalidArgument(std::string(what) + ": plan " + s_->text + " is not keep=auto");
  return *s_;
}

const AutoKeepPlan& BoundPlan::auto_keep() const { return auto_state("auto_keep").auto_plan; }

const KPredictorMeta& BoundPlan::predictor_meta() const {
  return auto_state("predictor_meta").predictor->meta;
}

std::vector<int64_t> BoundPlan::predict_keep(const at::Tensor& features) const {
  const auto& s = auto_state("predict_keep");
  std::vector<int64_t> out;
  for (const int rung : s.predictor->predict(features)) out.push_back(s.predictor->meta.ladder.at(rung));
  return out;
}

std::vector<int64_t> BoundPlan::predict_keep(VisionLanguageModel& model, const VisualTokens& vt,
                                             const std::vector<std::string>& questions) const {
  auto_state("predict_keep");
  return predict_keep(k_features(model, vt, questions));
}

BoundPlan BoundPlan::at_keep(int64_t keep) const {
  const auto& s = auto_state("at_keep");
  if (auto it = s.rungs.find(keep); it != s.rungs.end()) return it->second;
  return bind(s.auto_plan.full(keep, s.shape) ? PruningPlan{} : s.auto_plan.at(keep, s.shape), s.shape,
              s.env);
}

}  // namespace vispco
