// VisPCO search settings: validation, JSON round trip.
#include "optimize/learned/options.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "core/json_fields.h"
#include "optimize/learned/soft_prune.h"

namespace vispco::optimize::learned {

std::vector<double> release_train_budgets() {
  std::vector<double> b = {0.01};
  for (int i = 1; i <= 19; ++i) b.push_back(0.05 * i);
  return b;
}

void SearchOptions::validate() const {
  auto bad = [](const std::string& what) { throw InvalidArgument("VisPCO: " + what); };
  check_soft_prune_scorer(scorer);
  kernel.validate();
  threshold.validate();
  al.validate();
  if (train_budgets.empty()) bad("train_budgets must hold at least one budget");
  std::set<double> seen;
  for (double b : train_budgets) {
    if (!(b >= 0 && b <= 1)) bad("training budgets must be in [0, 1], got " + std::to_string(b));
    if (!seen.insert(b).second) bad("training budget " + std::to_string(b) + " is repeated");
  }
  if (first_layer < 0) bad("first_layer must be ≥ 0, got " + std::to_string(first_layer));
  if (n_train < 1) bad("n_train must be ≥ 1, got " + std::to_string(n_train));
  if (n_val < 1) bad("n_val must be ≥ 1, got " + std::to_string(n_val));
  if (batch < 1) bad("batch must be ≥ 1, got " + std::to_string(batch));
  if (max_epochs < 1) bad("max_epochs must be ≥ 1, got " + std::to_string(max_epochs));
  if (min_epochs < 1 || min_epochs > max_epochs)
    bad("min_epochs must be in [1, max_epochs = " + std::to_string(max_epochs) + "], got " +
        std::to_string(min_epochs));
  if (!(lr > 0)) bad("lr must be > 0, got " + std::to_string(lr));
  if (!(min_lr >= 0 && min_lr <= lr)) bad("min_lr must be in [0, lr], got " + std::to_string(min_lr));
  if (!(warmup >= 0 && warmup < 1)) bad("warmup must be in [0, 1), got " + std::to_string(warmup));
  if (!(weight_decay >= 0)) bad("weight_decay must be ≥ 0, got " + std::to_string(weight_decay));
  if (!(kl_weight > 0)) bad("kl_weight must be > 0, got " + std::to_string(kl_weight));
  if (!(clip >= 0)) bad("clip must be ≥ 0, got " + std::to_string(clip));
  if (!(dropout >= 0 && dropout < 1)) bad("dropout must be in [0, 1), got " + std::to_string(dropout));
}

int64_t search_first_layer(const SearchOptions& o) { return std::max<int64_t>(1, o.first_layer); }

static const JsonFields<SearchOptions>& search_options_fields() {
  using T = SearchOptions;
  // A table, several fields a line:
  // clang-format off
  static const JsonFields<SearchOptions> fields("VisPCO", {
      {"scorer", &T::scorer}, {"first_layer", &T::first_layer},
      nested("kernel", &T::kernel, kernel_config_from_json),
      nested("threshold", &T::threshold, soft_threshold_options_from_json),
      nested("al", &T::al, al_options_from_json),
      named("floor", &T::floor, parse_budget_floor, budget_floor_name), {"train_budgets", &T::train_budgets},
      {"train_seed", &T::train_seed}, {"n_train", &T::n_train}, {"val_seed", &T::val_seed},
      {"n_val", &T::n_val}, {"batch", &T::batch}, {"max_epochs", &T::max_epochs},
      {"min_epochs", &T::min_epochs}, {"lr", &T::lr}, {"weight_decay", &T::weight_decay},
      {"min_lr", &T::min_lr}, {"warmup", &T::warmup}, {"kl_weight", &T::kl_weight}, {"clip", &T::clip},
      {"dropout", &T::dropout}, {"seed", &T::seed}, {"restore_best", &T::restore_best}});
  // clang-format on
  return fields;
}

nlohmann::json to_json(const SearchOptions& o) { return search_options_fields().write(o); }

SearchOptions search_options_from_json(const nlohmann::json& j) {
  return search_options_fields().read_valid(j);
}

}  // namespace vispco::optimize::learned
