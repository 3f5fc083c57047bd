// Target → plan, guard fallback and shadow draw for one request (see plan_policy.h).
#include "serve/plan_policy.h"

#include "core/errors.h"
#include "serve/api_error.h"

namespace vispco::serve {
namespace {

std::string unmeetable(const Target& t, const FrontierPlan& best) {
  char buf[160];
  std::snprintf(buf, sizeof buf, " (accuracy loss %s %.4f, FLOPs ratio %.4f)",
                best.loss_upper ? "bound" : "estimate", best.judged_loss(), best.flops_ratio);
  return "no plan of the frontier meets " + t.text() + "; the closest is " + best.plan + buf;
}

}  // namespace

PlanPolicy::PlanPolicy(BatchScheduler& scheduler, Metrics* metrics, PolicyOptions opts,
                       std::function<void(const std::string&)> log)
    : scheduler_(scheduler),
      opts_(std::move(opts)),
      shadow_(opts_.shadow, metrics),
      guard_(opts_.guard, shadow_, opts_.frontier ? &*opts_.frontier : nullptr, metrics, std::move(log)) {
  opts_.default_target.validate();
  if (opts_.frontier) {
    opts_.frontier->canonicalise([&](const std::string& p) {
      try {
        return scheduler_.resolve_plan(p);
      } catch (const Error& e) {
        throw ConfigError("--frontier " + opts_.frontier->source() + ": plan " + p +
                          " does not run on this model: " + e.what());
      }
    });
  }
  if (!opts_.default_target.empty()) {
    if (!opts_.frontier)
      throw InvalidArgument("a default target needs --frontier (the plans to choose from)");
    if (opts_.frontier->pick(opts_.default_target) == nullptr)
      throw InvalidArgument("default target: " +
                            unmeetable(opts_.default_target, opts_.frontier->closest(opts_.default_target)));
  }
}

PlanChoice PlanPolicy::choose(const std::string& plan, const Target& target, double temperature) {
  PlanChoice c;
  const Frontier* f = opts_.frontier ? &*opts_.frontier : nullptr;
  bool server_chosen = true;
  if (!plan.empty()) {
    server_chosen = false;
    try {
      c.label = scheduler_.resolve_plan(plan);
    } catch (const Error& e) {
      throw bad_request(std::string("vispco.plan: ") + e.what(), "vispco");
    }
    c.info["plan_source"] = "request";
  } else {
    const Target& t = target.empty() ? opts_.default_target : target;
    if (!t.empty()) {
      if (f == nullptr)
        throw bad_request("this server has no frontier to meet a target with (start it with --frontier FILE)",
                          "vispco");
      const FrontierPlan* p = f->pick(t);
      if (p == nullptr) throw bad_request(unmeetable(t, f->closest(t)), "vispco");
      c.label = p->plan;
      c.info["plan_source"] = target.empty() ? "server_target" : "request_target";
      c.info["target"] = t.to_json();
    } else {
      c.label = scheduler_.resolve_plan("");
      c.info["plan_source"] = "server_default";
    }
  }
  c.plan = server_chosen && guard_.enabled() ? guard_.route(c.label) : c.label;
  if (c.plan != c.label)
    c.info["guard"] = {{"fallback_from", c.label},
                       {"reason", "the guard took " + c.label + " out of service (shadow agreement bound)"}};
  if (f != nullptr)
    if (const FrontierPlan* p = f->find(c.plan)) c.info["promised"] = p->promise_json();
  c.label = c.plan;  // shadow counts belong to the plan that ran (after any fallback)
  c.temperature = temperature;
  return c;
}

void PlanPolicy::arm(GenerationJob& job, PlanChoice& c) {
  job.plan = c.plan;
  c.shadowed = shadow_.draw(c.plan, c.temperature);
  c.info["shadowed"] = c.shadowed;
  if (!c.shadowed) return;
  const std::string label = c.label;
  job.on_answered = [this, label](const GenerationJob& j, const JobResult& r) {
    if (!scheduler_.submit_background(shadow_.shadow_job(j, label, r.text))) shadow_.lost(label);
  };
}

}  // namespace vispco::serve
