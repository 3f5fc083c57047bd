// Reading JSON with a nesting limit (see json_file.h).
#include "core/json_file.h"

#include <fstream>
#include <istream>

#include "core/errors.h"

namespace vispco {

namespace {

using json = nlohmann::json;

// Thrown from inside the parser callback, caught below and turned into a FormatError naming the source.
struct TooDeep {};

json::parser_callback_t depth_guard(const json::parser_callback_t& on_event) {
  return [&on_event](int depth, json::parse_event_t event, json& parsed) {
    // `depth` counts the arrays/objects already open; starting one more past the limit stops the parse.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return on_event ? on_event(depth, event, parsed) : true;
  };
}

template <typename Input>
json parse_guarded(Input&& input, const std::string& where, const json::parser_callback_t& on_event) {
  try {
    return json::parse(std::forward<Input>(input), depth_guard(on_event));
  } catch (const TooDeep&) {
    throw FormatError(where + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels (arrays/objects)");
  } catch (const json::exception& e) {
    throw FormatError(where + " is not valid JSON: " + e.what());
  }
}

}  // namespace

json parse_json(std::string_view text, const std::string& where, const json::parser_callback_t& on_event) {
  return parse_guarded(text, where, on_event);
}

json parse_json(std::istream& in, const std::string& where, const json::parser_callback_t& on_event) {
  return parse_guarded(in, where, on_event);
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + what + " '" + path + "'");
  return parse_json(in, path);
}

}  // namespace vispco
