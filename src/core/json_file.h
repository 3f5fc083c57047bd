// Reading JSON (files, file headers, records) with the project's one-line errors and a nesting limit, so that
// no file can make a reader recurse without bound (nlohmann's dump(), copies and comparisons recurse; its
// parser does not).
#pragma once
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace vispco {

/// Deepest nesting of arrays and objects parse_json() accepts. The deepest file vispco reads (a Hugging Face
/// tokenizer.json) nests under 10 levels; the server's request parser uses the same figure.
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` as JSON, refusing more than kMaxJsonDepth nested arrays/objects as soon as the parser gets
/// there (so a 100,000-deep "[[[[…" fails fast, with no deep value built). @param where names the source in
/// errors, e.g. "/m/config.json" or "safetensors file 'x': header". @param on_event an optional nlohmann
/// parser callback run after the depth check (its return value keeps or drops the value, as in json::parse).
/// @throws FormatError "<where> is not valid JSON: <reason>" or "<where>: JSON nested deeper than 64 levels
/// (arrays/objects)".
nlohmann::json parse_json(std::string_view text, const std::string& where,
                          const nlohmann::json::parser_callback_t& on_event = nullptr);

/// parse_json() over a stream (read to its end).
nlohmann::json parse_json(std::istream& in, const std::string& where,
                          const nlohmann::json::parser_callback_t& on_event = nullptr);

/// Parses the JSON file at `path` with parse_json(). @param what how an unreadable file is named in the
/// error, e.g. "recipe" ("cannot read recipe '<path>'"). @throws IoError when the file cannot be opened;
/// FormatError
/// "<path> is not valid JSON: …" when it does not parse, "<path>: JSON nested deeper than 64 levels …".
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace vispco
