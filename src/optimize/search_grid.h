// grid's own settings, a section of OptimizeOptions (optimize.h): the K values of every template.
// search_grid.cpp holds grid's flags, validation, search and report section.
#pragma once
#include <cstdint>
#include <vector>

#include "core/json_fields.h"

namespace vispco::optimize {

/// The settings only grid reads (a plain value: defaults, validate(), JSON fields, equality).
struct GridSearchOptions {
  /// The K values of every template, each ≥ 1 (templates that reject a K, e.g. pool at a non-square, skip
  /// it).
  std::vector<int64_t> keeps;

  /// @throws InvalidArgument naming the bad value.
  void validate() const;
  /// Also checks every K against N_v = `n_visual`.
  void validate(int64_t n_visual) const;
  bool operator==(const GridSearchOptions&) const = default;
};
/// Its JSON keys: keeps.
const JsonFields<GridSearchOptions>& grid_search_fields();

}  // namespace vispco::optimize
