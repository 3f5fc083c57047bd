// Reading a JSON file with the project's one-line errors.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace vispco {

/// Parses the JSON file at `path`. @param what how an unreadable file is named in the error, e.g. "recipe"
/// ("cannot read recipe '<path>'"). @throws IoError when the file cannot be opened; FormatError
/// "<path> is not valid JSON: …" when it does not parse.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace vispco
