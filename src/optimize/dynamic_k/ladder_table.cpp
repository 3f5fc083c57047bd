// Labels and assignment figures of a ladder table (see ladder_table.h).
#include "optimize/dynamic_k/ladder_table.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco::optimize {

const char* k_target_name(KTarget t) { return t == KTarget::kCorrect ? "correct" : "agree"; }

KTarget k_target_from_name(const std::string& name) {
  if (name == "correct") return KTarget::kCorrect;
  if (name == "agree") return KTarget::kAgree;
  throw InvalidArgument("dynamic-k: unknown label target '" + name + "' (valid: correct, agree)");
}

void LadderTable::validate() const {
  if (ladder.size() < 2) throw InvalidArgument("dynamic-k: the K ladder needs at least 2 rungs");
  for (size_t r = 1; r < ladder.size(); ++r)
    if (ladder[r] <= ladder[r - 1])
      throw InvalidArgument("dynamic-k: the K ladder must be strictly ascending");
  const size_t n = ids.size(), R = ladder.size();
  if (families.size() != n || score.size() != n || agree.size() != n || llm_flops.size() != n)
    throw InvalidArgument("dynamic-k: ladder table columns differ in length");
  for (size_t i = 0; i < n; ++i)
    if (score[i].size() != R || agree[i].size() != R || llm_flops[i].size() != R)
      throw InvalidArgument("dynamic-k: ladder table row " + std::to_string(i) +
                            " has the wrong number of rungs");
}

std::vector<int> ladder_labels(const LadderTable& t, KTarget target) {
  t.validate();
  const int R = static_cast<int>(t.rungs());
  std::vector<int> out(t.n(), -1);
  for (size_t i = 0; i < t.n(); ++i) {
    auto ok = [&](int r) { return target == KTarget::kCorrect ? t.score[i][r] >= 1.0 : t.agree[i][r] != 0; };
    if (!ok(R - 1)) continue;  // kCorrect only: wrong even unpruned
    int r = R - 1;
    while (r > 0 && ok(r - 1)) --r;
    out[i] = r;
  }
  return out;
}

AssignmentFigures assignment_figures(const LadderTable& t, const std::vector<int>& rungs) {
  t.validate();
  if (rungs.size() != t.n()) throw InvalidArgument("dynamic-k: one rung per sample expected");
  const int R = static_cast<int>(t.rungs());
  AssignmentFigures f;
  struct Sums {
    size_t n = 0;
    double score = 0, flops = 0, flops_full = 0, keep = 0, score_full = 0;
  };
  Sums all;
  std::map<std::string, Sums> fam;
  for (size_t i = 0; i < t.n(); ++i) {
    const int r = rungs[i];
    if (r < 0 || r >= R)
      throw InvalidArgument("dynamic-k: rung " + std::to_string(r) + " outside the ladder");
    for (Sums* s : {&all, &fam[t.families[i]]}) {
      s->n += 1;
      s->score += t.score[i][r];
      s->flops += t.llm_flops[i][r];
      s->flops_full += t.llm_flops[i][R - 1];
      s->keep += static_cast<double>(t.ladder[r]);
      s->score_full += t.score[i][R - 1];
    }
  }
  auto finish = [](const Sums& s, double& acc, double& ratio, double& keep) {
    acc = s.n ? s.score / s.n : 0.0;
    ratio = s.flops_full > 0 ? s.flops / s.flops_full : 1.0;
    keep = s.n ? s.keep / s.n : 0.0;
  };
  finish(all, f.accuracy, f.flops_ratio, f.mean_keep);
  for (const auto& [name, s] : fam) {
    auto& out = f.per_family[name];
    out.n = s.n;
    finish(s, out.accuracy, out.flops_ratio, out.mean_keep);
    out.unpruned_accuracy = s.n ? s.score_full / s.n : 0.0;
  }
  return f;
}

std::vector<int> constant_rungs(const LadderTable& t, int r) { return std::vector<int>(t.n(), r); }

nlohmann::json to_json(const AssignmentFigures& f) {
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, x] : f.per_family)
    fam[name] = {{"n", x.n},
                 {"accuracy", x.accuracy},
                 {"unpruned_accuracy", x.unpruned_accuracy},
                 {"flops_ratio", x.flops_ratio},
                 {"mean_keep", x.mean_keep}};
  return {{"accuracy", f.accuracy},
          {"flops_ratio", f.flops_ratio},
          {"mean_keep", f.mean_keep},
          {"per_family", fam}};
}

}  // namespace vispco::optimize
