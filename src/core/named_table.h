// Looking a name up in one of vispco's registries (scorers, presets, kernels, …) with the project's one
// error.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "core/errors.h"

namespace vispco {

/// "a, b, c" (empty for no names).
inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// The items of a comma-separated list, empty ones left out: "a,,b" → {"a", "b"} (not trimmed).
inline std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ','))
    if (!piece.empty()) out.push_back(piece);
  return out;
}

/// The row of `table` (a range of rows with a `name` member convertible to std::string) whose name is `name`.
/// @param what how the name is called in the error ("scorer", "preset", …)
/// @param extra appended to the list of valid names in the error (e.g. ", and the shorthand pdrop")
/// @throws InvalidArgument "unknown <what> '<name>' (valid: <names><extra>)".
template <typename Table>
const auto& find_named(const Table& table, const std::string& name, const std::string& what,
                       const std::string& extra = "") {
  std::vector<std::string> names;
  for (const auto& row : table) {
    if (row.name == name) return row;
    names.emplace_back(row.name);
  }
  throw InvalidArgument("unknown " + what + " '" + name + "' (valid: " + join_names(names) + extra + ")");
}

}  // namespace vispco
