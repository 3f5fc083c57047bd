// grid's own settings, a section of OptimizeOptions (optimize.h): the K values and keep ratios of every
// template. search_grid.cpp holds grid's flags, validation, search and report section.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json_fields.h"

namespace vispco::optimize {

/// The settings only grid reads (a plain value: defaults, validate(), JSON fields, equality).
struct GridSearchOptions {
  /// The K values of every template, each ≥ 1 (templates that reject a K, e.g. pool at a non-square, skip
  /// it).
  std::vector<int64_t> keeps;
  /// The keep ratios of every keep-ratio template (plan_template.h), in ‰ of each image's N_v, each in
  /// [1, 1000] (`--keep 50%,25%,12.5%`).
  std::vector<int64_t> keep_ratios;

  /// @throws InvalidArgument naming the bad value.
  void validate() const;
  /// Also checks every K against N_v = `n_visual`.
  void validate(int64_t n_visual) const;
  bool operator==(const GridSearchOptions&) const = default;
};
/// Its JSON keys: keeps, keep_ratios.
const JsonFields<GridSearchOptions>& grid_search_fields();
/// `--keep` of grid: "64,32,25%,12.5%" → (counts {64, 32}, keep ratios in ‰ {250, 125}).
/// @throws InvalidArgument for an entry that is neither an integer nor a share with at most one decimal.
std::pair<std::vector<int64_t>, std::vector<int64_t>> parse_grid_keeps(const std::string& text);

}  // namespace vispco::optimize
