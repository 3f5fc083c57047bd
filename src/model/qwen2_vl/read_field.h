// Reading one optional field of a Qwen config object (config.json's vision_config, preprocessor_config.json)
// with the project's errors: an integer field refuses 2.5 (nlohmann would truncate it silently).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/errors.h"

namespace vispco::qwen2_vl_detail {

/// Reads j[key] into `out` when present and not null. @return whether it was read.
/// @throws ConfigError "<where>.<key> has the wrong type (got …)" for a wrong JSON type or a non-integer
/// number for an integer field.
template <class T>
bool read_field(const nlohmann::json& j, const char* key, const std::string& where, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number_integer())
      throw ConfigError(where + "." + key + " has the wrong type (got " + it->dump() +
                        "; expected an integer)");
  }
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ConfigError(where + "." + key + " has the wrong type (got " + it->dump() + ")");
  }
  return true;
}

}  // namespace vispco::qwen2_vl_detail
