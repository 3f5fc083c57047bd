// VisPCO search settings: validation, JSON round trip, the scorer table.
#include "optimize/learned/options.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "core/named_table.h"

namespace vispco::optimize::learned {

const std::vector<PcoScorerEntry>& pco_scorer_registry() {
  static const std::vector<PcoScorerEntry> table = {
      {"fastv", 1, "FastV (Chen et al., ECCV 2024): last prompt token's attention at layer i−1, head mean"},
  };
  return table;
}

const PcoScorerEntry& find_pco_scorer(const std::string& name) {
  return find_named(pco_scorer_registry(), name, "scorer");
}

std::vector<double> release_train_budgets() {
  std::vector<double> b = {0.01};
  for (int i = 1; i <= 19; ++i) b.push_back(0.05 * i);
  return b;
}

void SearchOptions::validate() const {
  auto bad = [](const std::string& what) { throw InvalidArgument("VisPCO: " + what); };
  find_pco_scorer(scorer);
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

int64_t search_first_layer(const SearchOptions& o) {
  return std::max(find_pco_scorer(o.scorer).first_layer, o.first_layer);
}

nlohmann::json to_json(const SearchOptions& o) {
  return {{"scorer", o.scorer},
          {"first_layer", o.first_layer},
          {"kernel", to_json(o.kernel)},
          {"threshold", to_json(o.threshold)},
          {"al", to_json(o.al)},
          {"floor", budget_floor_name(o.floor)},
          {"train_budgets", o.train_budgets},
          {"train_seed", o.train_seed},
          {"n_train", o.n_train},
          {"val_seed", o.val_seed},
          {"n_val", o.n_val},
          {"batch", o.batch},
          {"max_epochs", o.max_epochs},
          {"min_epochs", o.min_epochs},
          {"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"min_lr", o.min_lr},
          {"warmup", o.warmup},
          {"kl_weight", o.kl_weight},
          {"clip", o.clip},
          {"dropout", o.dropout},
          {"seed", o.seed},
          {"restore_best", o.restore_best}};
}

SearchOptions search_options_from_json(const nlohmann::json& j) {
  SearchOptions o;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "scorer")
        o.scorer = v.get<std::string>();
      else if (key == "first_layer")
        o.first_layer = v.get<int64_t>();
      else if (key == "kernel")
        o.kernel = kernel_config_from_json(v);
      else if (key == "threshold")
        o.threshold = soft_threshold_options_from_json(v);
      else if (key == "al")
        o.al = al_options_from_json(v);
      else if (key == "floor")
        o.floor = parse_budget_floor(v.get<std::string>());
      else if (key == "train_budgets")
        o.train_budgets = v.get<std::vector<double>>();
      else if (key == "train_seed")
        o.train_seed = v.get<uint64_t>();
      else if (key == "n_train")
        o.n_train = v.get<int64_t>();
      else if (key == "val_seed")
        o.val_seed = v.get<uint64_t>();
      else if (key == "n_val")
        o.n_val = v.get<int64_t>();
      else if (key == "batch")
        o.batch = v.get<int64_t>();
      else if (key == "max_epochs")
        o.max_epochs = v.get<int64_t>();
      else if (key == "min_epochs")
        o.min_epochs = v.get<int64_t>();
      else if (key == "lr")
        o.lr = v.get<double>();
      else if (key == "weight_decay")
        o.weight_decay = v.get<double>();
      else if (key == "min_lr")
        o.min_lr = v.get<double>();
      else if (key == "warmup")
        o.warmup = v.get<double>();
      else if (key == "kl_weight")
        o.kl_weight = v.get<double>();
      else if (key == "clip")
        o.clip = v.get<double>();
      else if (key == "dropout")
        o.dropout = v.get<double>();
      else if (key == "seed")
        o.seed = v.get<uint64_t>();
      else if (key == "restore_best")
        o.restore_best = v.get<bool>();
      else
        throw InvalidArgument("VisPCO: unknown search setting '" + key + "'");
    } catch (const nlohmann::json::exception&) {
      throw InvalidArgument("VisPCO: search setting '" + key + "' has the wrong type (got " + v.dump() + ")");
    }
  }
  o.validate();
  return o;
}

}  // namespace vispco::optimize::learned
