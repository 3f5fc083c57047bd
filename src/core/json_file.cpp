// Reading a JSON file (see json_file.h).
#include "core/json_file.h"

#include <fstream>

#include "core/errors.h"

namespace vispco {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + what + " '" + path + "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(path + " is not valid JSON: " + e.what());
  }
}

}  // namespace vispco
