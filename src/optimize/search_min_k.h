// min-k's own settings, a section of OptimizeOptions (optimize.h): the K range its binary search covers.
// search_min_k.cpp holds min-k's flags, validation, search and report section.
#pragma once
#include <cstdint>

#include "core/json_fields.h"

namespace vispco::optimize {

/// The settings only min-k reads (a plain value: defaults, validate(), JSON fields, equality).
struct MinKSearchOptions {
  /// Searched K ∈ {k_min, k_min + k_step, …} ∪ {k_max}; k_min ≥ 1, k_step ≥ 1, k_max = 0 means N_v, else
  /// k_max ≥ k_min. For a keep-ratio template the values are keep ratios in ‰ (1–1000; k_max = 0 means 1000).
  int64_t k_min = 1, k_max = 0, k_step = 1;

  /// @throws InvalidArgument naming the bad value.
  void validate() const;
  /// Also checks the range against the template's largest parameter: N_v = `param_max` for a K template, or
  /// 1000 (‰) when `keep_ratio`.
  void validate(int64_t param_max, bool keep_ratio = false) const;
  bool operator==(const MinKSearchOptions&) const = default;
};
/// Its JSON keys: k_min, k_max, k_step.
const JsonFields<MinKSearchOptions>& min_k_search_fields();

}  // namespace vispco::optimize
